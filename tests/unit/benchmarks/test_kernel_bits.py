"""benchmarks/vllm/kernel_bits.py: the project's kernels' output digests on inputs that are the same bytes on
every machine, and the comparison of two records (which outputs differ, which machine fields). Run here in
Triton's interpreter at its small shapes; on a GPU it runs the 8B shapes (benchmarks/vllm/README.md)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

from benchmarks.vllm import kernel_bits
from tests.conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "vllm" / "kernel_bits.py"


def _run(out, *args):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    cmd = [sys.executable, str(SCRIPT), "--device", "cpu", "--small", "--out", str(out), *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text()), done.stdout


def test_two_runs_give_the_same_bytes_and_the_comparison_says_so(tmp_path):
    first, _ = _run(tmp_path / "a.json")
    kernels = {key.split()[0] for key in first["outputs"]}
    assert kernels == {"w4a16", "linear16"}
    assert len(first["outputs"]) == 2 * len(kernel_bits.SMALL_SHAPES) * len(kernel_bits.SMALL_ROWS)
    second, shown = _run(tmp_path / "b.json", "--compare", str(tmp_path / "a.json"))
    assert second["outputs"] == first["outputs"]
    (compared,) = second["compared"]
    assert compared["same_inputs"] and compared["machine_differs"] == {}
    assert {k: (v["same"], v["differ"]) for k, v in compared["kernels"].items()} == {
        "w4a16": (6, 0),
        "linear16": (6, 0),
    }
    assert "w4a16: 6 same, 0 differ" in shown


def test_the_comparison_names_the_differing_outputs_and_machine_fields():
    old = {
        "machine": {"gpu": "NVIDIA H100 80GB HBM3", "driver": "580.1", "sm_count": 132},
        "inputs": {"qkv_proj": {"x": "aa"}},
        "outputs": {
            "w4a16 qkv_proj M=1": "1",
            "w4a16 qkv_proj M=7": "2",
            "cublas qkv_proj M=1": "3",
        },
    }
    new = copy.deepcopy(old)
    new["machine"].update(gpu="NVIDIA H200", driver="580.1")
    new["outputs"]["w4a16 qkv_proj M=7"] = "changed"
    new["outputs"]["linear16 qkv_proj M=1"] = "only in the new record"
    got = kernel_bits.compare(new, old, "old.json")
    assert got["machine_differs"] == {"gpu": ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]}
    assert got["kernels"] == {
        "w4a16": {"same": 1, "differ": 1, "differing": ["w4a16 qkv_proj M=7"]},
        "cublas": {"same": 1, "differ": 0, "differing": []},
    }
    new["inputs"]["qkv_proj"]["x"] = "other bytes"  # other inputs: nothing is compared
    got = kernel_bits.compare(new, old, "old.json")
    assert got["same_inputs"] is False and got["kernels"] == {}


def test_the_inputs_are_a_function_of_the_seed_and_the_dense_weights_match_the_words():
    a = kernel_bits.inputs(64, 256, 3, seed=1)
    b = kernel_bits.inputs(64, 256, 3, seed=1)
    assert all(kernel_bits.digest(a[k]) == kernel_bits.digest(b[k]) for k in a)
    assert kernel_bits.digest(a["x"]) != kernel_bits.digest(kernel_bits.inputs(64, 256, 3, 2)["x"])
    # the dense weights are what the words and scales stand for
    q = (a["words"][:, :, None] >> (4 * kernel_bits.torch.arange(8))) & 0xF
    dense = (q.reshape(64, 256).half() - 8) * a["scale"].repeat_interleave(kernel_bits.GROUP, 1)
    assert kernel_bits.torch.equal(dense, a["dense"])
