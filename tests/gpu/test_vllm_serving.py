"""On a GPU machine with vLLM installed and Triton's vLLM backend at $VLLM_BACKEND_SRC: benchmarks/vllm/h200.sh
builds the tiny fp16 and INT4 repositories, serves them with real vLLM in the embedded tritonserver and runs
`tritonbuild verify --server` (goldens bit for bit, streamed and not). Skips itself elsewhere (CI never has a GPU)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.gpu, pytest.mark.triton]


def test_vllm_repositories_verify_against_real_vllm_in_tritonserver(tmp_path):
    if shutil.which("nvidia-smi") is None or importlib.util.find_spec("vllm") is None:
        pytest.skip("needs an NVIDIA GPU and vLLM (benchmarks/vllm/README.md)")
    backend = os.environ.get("VLLM_BACKEND_SRC")
    if not backend:
        pytest.skip("set VLLM_BACKEND_SRC to vllm_backend's src/ (branch r26.01)")
    env = {
        **os.environ,
        "TRITONBUILD_SRC": str(ROOT),
        "OUT": str(tmp_path),
        "H200_WORK": str(tmp_path / "vw"),
    }
    steps = ["setup", "build", "serve", "verify", "stop"]
    run = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "vllm" / "h200.sh"), *steps],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    report = json.loads((tmp_path / "vw" / "results" / "verify.json").read_text())
    assert report["passed"], run.stdout[-4000:]
    assert {m["name"] for m in report["models"] if m["passed"]} == {
        "tiny-llama-fp16",
        "tiny-llama-int4",
    }
