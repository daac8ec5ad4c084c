"""The plugin against vLLM's own modules, where vLLM imports (the GPU machine after setup; a CPU with vLLM 0.22.0's
wheel and its pure-Python dependencies on the path, 2026-12-07; skipped elsewhere, CI included): register() in
batch-invariant mode, in a process of its own (it changes vLLM's registries), puts the W4A16 kernel first among the
CUDA mixed-precision kernels and wraps the unquantized linear, the lm_head's linear and the top-k / top-p filter; the
kernel takes vLLM's own MPLinearLayerConfig for a compressed-tensors W4A16 layer and refuses what it cannot compute;
vLLM's UnquantizedEmbeddingMethod marks the lm_head's weight at load only within the measured max_num_seqs."""

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
from vllm.model_executor.layers import linear, vocab_parallel_embedding as vpe
from vllm.config import SchedulerConfig, get_current_vllm_config_or_none
from vllm.platforms import PlatformEnum
from vllm.scalar_type import scalar_types
from vllm.v1.sample.ops import topk_topp_sampler

first = _POSSIBLE_KERNELS[PlatformEnum.CUDA][0]
def config(**change):
    fields = dict(full_weight_shape=(4096, 6144), partition_weight_shape=(4096, 6144),
                  weight_type=scalar_types.uint4b8, act_type=torch.float16, group_size=128,
                  zero_points=False, has_g_idx=False)
    return MPLinearLayerConfig(**{**fields, **change})
# the lm_head marker on vLLM's own UnquantizedEmbeddingMethod, the engine's config stood in for (a VllmConfig needs a
# device platform), a small layer measured for the test's sake
import types, vllm.config
from tritonbuild.backends.vllm.invariant import linear16
linear16.LM_HEAD_MEASURED[("test GPU", (48, 128))] = 64
linear16._gpu_name = lambda weight: "test GPU"
layers = {}
for seqs in (64, 65):
    sched = types.SimpleNamespace(max_num_seqs=seqs)
    vllm.config.get_current_vllm_config_or_none = lambda: types.SimpleNamespace(scheduler_config=sched)
    layers[seqs] = layer = torch.nn.Module()
    layer.weight = torch.nn.Parameter(torch.randn(48, 128).half(), requires_grad=False)
    vpe.UnquantizedEmbeddingMethod().process_weights_after_loading(layer)
print(json.dumps({
    "lm_head_marked": [getattr(layers[n].weight, "tritonbuild_lm_head", False) for n in (64, 65)],
}))
print(json.dumps({
    "first": first.__name__,
    "min_capability": first.get_min_capability(),
    "takes": first.can_implement(config()),
    "zero_points": first.can_implement(config(zero_points=True, weight_type=scalar_types.uint4)),
    "g_idx": first.can_implement(config(has_g_idx=True)),
    "linear_wrapped": hasattr(linear.linear_batch_invariant, "tritonbuild_fallback"),
    "filter_wrapped": hasattr(topk_topp_sampler.apply_top_k_top_p, "tritonbuild_fallback"),
    "lm_head_wrapped": hasattr(vpe.linear_batch_invariant, "tritonbuild_fallback"),
    "lm_head_marker": hasattr(vpe.UnquantizedEmbeddingMethod.process_weights_after_loading, "tritonbuild_original"),
    "max_num_seqs_field": "max_num_seqs" in SchedulerConfig.__dataclass_fields__,
}))
"""


def test_register_with_vllms_own_modules():
    pytest.importorskip("vllm.model_executor.kernels.linear")
    env = {
        **os.environ,
        "VLLM_BATCH_INVARIANT": "1",
        "TRITON_INTERPRET": "1",
    }  # the kernel on the CPU
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lm_head, got = (json.loads(line) for line in done.stdout.strip().splitlines()[-2:])
    assert lm_head == {
        "lm_head_marked": [True, False]
    }  # the kernel under the wrapper: test_vllm_linear16.py
    assert got["first"] == "TritonbuildInvariantW4A16Kernel" and got["min_capability"] == 80
    assert got["takes"] == [True, None]
    assert got["zero_points"][0] is False and "zero points" in got["zero_points"][1]
    assert got["g_idx"][0] is False and "g_idx" in got["g_idx"][1]
    assert got["linear_wrapped"] and got["filter_wrapped"]
    # the lm_head: vocab_parallel_embedding's own linear_batch_invariant wrapped, the embedding method's weight
    # processing marking the weights the kernel takes, reading max_num_seqs from the scheduler's config
    assert got["lm_head_wrapped"] and got["lm_head_marker"] and got["max_num_seqs_field"]
