"""A no-op rebuild loads no torch or onnx (they cost 1.1-1.6 s of a 2.3 s no-op rebuild)."""

import json
import os
import subprocess
import sys

import pytest

MODEL = """
import torch


def build_model():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 2)
"""
CODE = (
    "import atexit, sys; atexit.register(lambda: print('HEAVY', sorted(m for m in ('torch', 'onnx', "
    "'onnxruntime') if m in sys.modules), file=sys.stderr)); "
    "from tritonbuild.cli import main; sys.argv[0] = 'tritonbuild'; main()"
)


def _build(tmp_path, env):
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            CODE,
            "build",
            str(tmp_path / "recipes"),
            "-o",
            str(tmp_path / "OUT"),
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    heavy = [ln for ln in res.stderr.splitlines() if ln.startswith("HEAVY")][-1]
    return json.loads(res.stdout), heavy


@pytest.mark.slow
def test_noop_rebuild_imports_no_torch_and_builds_the_same(write, tmp_path):
    write("recipes/net.py", MODEL)
    for backend in ("onnxruntime", "pytorch"):
        write(
            f"recipes/{backend}.yaml",
            f"name: {backend}-net\nversion: 1\nbackend: {backend}\nsource:\n  export:\n"
            "    module: 'net:build_model'\n"
            "    inputs: {x: {dtype: fp32, shape: [2, 3]}}\n    outputs: [y]\n"
            "max_batch_size: 2\n",
        )
    env = {**os.environ, "TRITONBUILD_CACHE_DIR": str(tmp_path / "cache")}
    first, heavy = _build(tmp_path, env)
    assert "torch" in heavy  # the full build does export: the check can see torch
    config = {p: p.read_bytes() for p in (tmp_path / "OUT").rglob("config.pbtxt")}
    again, heavy = _build(tmp_path, env)
    assert heavy == "HEAVY []"
    assert all(s["status"] == "cached" for m in again["models"] for s in m["steps"])
    assert again["manifest_digest"] == first["manifest_digest"]
    assert config == {p: p.read_bytes() for p in (tmp_path / "OUT").rglob("config.pbtxt")}
