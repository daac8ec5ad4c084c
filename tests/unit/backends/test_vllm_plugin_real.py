"""The plugin against vLLM's own modules, where vLLM imports (the GPU machine after setup; a CPU with vLLM 0.22.0's
wheel and its pure-Python dependencies on the path, 2026-12-07; skipped elsewhere, CI included): register() in
batch-invariant mode, in a process of its own (it changes vLLM's registries), puts the W4A16 kernel first among the
CUDA mixed-precision kernels and wraps the unquantized linear and the top-k / top-p filter; the kernel takes vLLM's
own MPLinearLayerConfig for a compressed-tensors W4A16 layer and refuses what it cannot compute."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = r"""
import json, torch
from tritonbuild.backends.vllm.invariant import plugin
plugin.register()
from vllm.model_executor.kernels.linear import _POSSIBLE_KERNELS
from vllm.model_executor.kernels.linear.mixed_precision.MPLinearKernel import MPLinearLayerConfig
from vllm.model_executor.layers import linear
from vllm.platforms import PlatformEnum
from vllm.scalar_type import scalar_types
from vllm.v1.sample.ops import topk_topp_sampler

first = _POSSIBLE_KERNELS[PlatformEnum.CUDA][0]
def config(**change):
    fields = dict(full_weight_shape=(4096, 6144), partition_weight_shape=(4096, 6144),
                  weight_type=scalar_types.uint4b8, act_type=torch.float16, group_size=128,
                  zero_points=False, has_g_idx=False)
    return MPLinearLayerConfig(**{**fields, **change})
print(json.dumps({
    "first": first.__name__,
    "min_capability": first.get_min_capability(),
    "takes": first.can_implement(config()),
    "zero_points": first.can_implement(config(zero_points=True, weight_type=scalar_types.uint4)),
    "g_idx": first.can_implement(config(has_g_idx=True)),
    "linear_wrapped": hasattr(linear.linear_batch_invariant, "tritonbuild_fallback"),
    "filter_wrapped": hasattr(topk_topp_sampler.apply_top_k_top_p, "tritonbuild_fallback"),
}))
"""


def test_register_with_vllms_own_modules():
    pytest.importorskip("vllm.model_executor.kernels.linear")
    env = {**os.environ, "VLLM_BATCH_INVARIANT": "1"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["first"] == "TritonbuildInvariantW4A16Kernel" and got["min_capability"] == 80
    assert got["takes"] == [True, None]
    assert got["zero_points"][0] is False and "zero points" in got["zero_points"][1]
    assert got["g_idx"][0] is False and "g_idx" in got["g_idx"][1]
    assert got["linear_wrapped"] and got["filter_wrapped"]
