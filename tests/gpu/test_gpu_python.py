"""On a GPU machine: a Python-backend model with KIND_GPU instances running a torch fp16 MLP on the GPU,
built and verified live in the embedded tritonserver (goldens bit for bit, batch composition reported).
Skips itself without a GPU (CI never has one)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.triton]

MODEL = """
import numpy as np
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        torch.manual_seed(0)
        self.device = f"cuda:{args['model_instance_device_id']}"
        self.net = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                       torch.nn.Linear(4096, 1024)).to(self.device).half().eval()

    def execute(self, requests):
        xs = [pb_utils.get_input_tensor_by_name(r, "X").as_numpy() for r in requests]
        sizes = [x.shape[0] for x in xs]
        with torch.inference_mode():
            y = self.net(torch.from_numpy(np.concatenate(xs)).to(self.device)).float().cpu().numpy()
        out, i = [], 0
        for n in sizes:
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.ascontiguousarray(y[i:i + n]))]))
            i += n
        return out
"""

RECIPE = """
name: gpu-mlp
version: 1
backend: python
target: gpu
source: {path: model.py}
max_batch_size: 64
inputs: [{name: X, dtype: fp16, dims: [1024]}]
outputs: [{name: Y, dtype: fp32, dims: [1024]}]
instances: [{kind: gpu, count: 2, gpus: [0]}]
batching: {preferred_batch_sizes: [32, 64], max_queue_delay_us: 2000}
verify: {goldens: goldens/gpu-mlp.npz, samples: 8, repeats: 5, batch_invariance: report}
"""


@pytest.fixture(autouse=True)
def _gpu_only():
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no NVIDIA GPU here")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")


def test_gpu_model_verifies_live_bit_exact(cli, tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "gpu-mlp.yaml").write_text(RECIPE.lstrip())
    out = tmp_path / "OUT"
    assert cli("build", tmp_path / "gpu-mlp.yaml", "-o", out).exit_code == 0
    rec = cli("verify", out, "--record", "--json")
    assert rec.exit_code == 0, rec.stdout
    assert cli("build", tmp_path / "gpu-mlp.yaml", "-o", out).exit_code == 0
    r = cli("verify", out, "--json")
    report = json.loads(r.stdout)
    keep = os.environ.get("TRITONBUILD_GPU_REPORT")
    if keep:
        Path(keep).write_text(json.dumps(report, indent=2))
    assert r.exit_code == 0, r.stdout
    (m,) = report["models"]
    assert m["path"] == "live-embedded" and "NVIDIA" in m["path_detail"]
    assert m["compared"] == 8 * 5 and m["mismatches"] == []
    assert m["batch_invariance"] in ("invariant", "variant")
