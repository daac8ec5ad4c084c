"""benchmarks/vllm/linear16_bench.py on the CPU: its candidates are tiles the fp16 kernel takes as they are, its
per-step arithmetic is what it says, and vLLM 0.22.0's own batch-invariant linear (the file from the wheel, where the
wheel is on disk) loads without vLLM and computes x @ W.T in Triton's interpreter, leaving no vllm module behind."""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

import pytest

# NOTE: set before Triton's first import (see test_w4a16_bench)
os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from benchmarks.vllm import linear16_bench as bench  # noqa: E402
from benchmarks.vllm import linear16_choose as choose  # noqa: E402
from benchmarks.vllm.vllm_batch_invariant import load_vllm_batch_invariant  # noqa: E402

WHEEL = Path(os.environ.get("WHEEL_CACHE", Path.home() / ".cache" / "tritonbuild-gpu-wheels")) / (
    "vllm-0.22.0-cp38-abi3-manylinux_2_28_x86_64.whl"
)


def test_the_sweeps_candidates_are_tiles_the_kernel_takes_at_each_llama_shape():
    """Each candidate: slices of whole BLOCK_K steps (no masked loads), 128 .. 1,100 programs at one row, its stages
    inside SMEM_LIMIT, taken by tiles_for as it is; every shape has several."""
    kernel = bench.load_kernel()
    for _, n, k in bench.bench.SHAPES:
        candidates = bench.candidates_for(n, k)
        assert len(candidates) >= 20 and len(set(candidates)) == len(candidates)
        for tiles in candidates:
            block_m, block_n, block_k, _, stages, split = tiles
            assert kernel.k_slice_for(k, block_k, split) * split == k
            assert 128 <= -(-n // block_n) * split <= 1100
            assert (block_n + block_m) * block_k * 2 * stages <= bench.SMEM_LIMIT
            kernel.TILES[(n, k)] = tiles
            assert kernel.tiles_for(n, k) == tiles


def test_a_step_is_the_four_shapes_times_32_layers_and_the_fraction_is_the_bound_over_it():
    per_shape = {
        name: {
            m: {"fp16_invariant": 0.01, "fp16_cublas": 0.02, "fp16_vllm_invariant": 0.04}
            for m in (1, 8, 16, 32)
        }
        for name, _, _ in bench.bench.SHAPES
    }
    for name in per_shape:
        for m in (64, 128, 256):
            per_shape[name][m] = {"fp16_invariant": "cannot launch: x", "fp16_cublas": 0.02}
    out = bench.summarize(per_shape, "NVIDIA H100 80GB HBM3", 3e12, None)
    one = out["kernel"][1]
    assert one["fp16_invariant_ms"] == pytest.approx(4 * 0.01 * 32)
    assert one["speedup_vs_vllm_invariant"] == pytest.approx(4.0) and one[
        "vs_fp16_cublas"
    ] == pytest.approx(2.0)
    nbytes = (6144 + 4096 + 28672) * 4096 * 2 * 32 + 4096 * 14336 * 2 * 32
    assert out["bandwidth"]["fp16_bytes_per_step"] == nbytes
    assert one["bandwidth_fraction"] == pytest.approx(nbytes / 3.35e12 * 1e3 / 1.28)
    assert (
        out["kernel"][64]["fp16_invariant_ms"] is None
        and out["kernel"][64]["bandwidth_fraction"] is None
    )


@pytest.mark.skipif(not WHEEL.is_file(), reason=f"the vLLM 0.22.0 wheel is not at {WHEEL}")
def test_vllms_batch_invariant_linear_runs_from_its_file_without_vllm(tmp_path):
    """The file's six vLLM imports stood in for while it loads; its linear_batch_invariant (UnquantizedLinearMethod's
    path) then runs vLLM's persistent Triton matmul: here in the interpreter, 4 SMs, on a tiny layer."""
    path = tmp_path / "batch_invariant.py"
    with zipfile.ZipFile(WHEEL) as z:
        path.write_bytes(z.read("vllm/model_executor/layers/batch_invariant.py"))
    before = {name for name in sys.modules if name == "vllm" or name.startswith("vllm.")}
    module = load_vllm_batch_invariant(path, sms=4, smem=232448)
    assert {name for name in sys.modules if name == "vllm" or name.startswith("vllm.")} == before
    assert module._fp16_block_size_n == 256
    gen = torch.Generator().manual_seed(0)
    x = torch.randn((3, 64), generator=gen).half()
    w = (torch.randn((40, 64), generator=gen) * 0.1).half()
    y = module.linear_batch_invariant(x, w)
    want = x.double() @ w.double().T
    assert y.shape == (3, 40) and (y.double() - want).abs().max() <= 2**-9 * want.abs().max()


def _layer(rows: dict, cublas_64: float, vllm_256: float) -> dict:
    """A sweep's entry: {M: {tiles name: ms}} for the candidates (ms at 1, 64 and 256 rows)."""
    ms = {1: {}, 64: {"cublas_fp16_ms": cublas_64}, 256: {"vllm_invariant_ms": vllm_256}}
    for tiles, times in rows.items():
        for m, value in zip((1, 64, 256), times, strict=True):
            ms[m][choose.tiles_name(tiles)] = value
    return {"ms": ms, "candidates": list(rows)}


def test_the_chosen_rows_are_the_fastest_at_one_row_whose_256_rows_are_no_slower_than_vllms():
    """16-row tiles (a) are fastest at 1 row and slowest at 256; vLLM's linear takes 5 + 9 at 256 rows. Both layers on
    a (2.0 at 1 row) would fit cuBLAS's 64-row budget (3.7 of 1.25 x 3.0) but take 20 at 256 rows: y goes to its
    64-row tiles (b). With vLLM at 2 + 2 no pair fits at 256 rows: w4a16_choose's rule on 1 and 64 rows, both on a."""
    a, b, d = (16, 64, 128, 4, 4, 2), (64, 128, 128, 8, 4, 4), (32, 64, 128, 4, 4, 2)
    layers = {
        "x": _layer({a: (1.0, 1.7, 10.0), b: (1.5, 1.6, 3.0), d: (1.2, 1.8, 5.0)}, 1.5, 5.0),
        "y": _layer({a: (1.0, 2.0, 10.0), b: (1.5, 1.6, 3.0)}, 1.5, 9.0),
    }
    assert choose.choose(layers, 1.25) == {"x": a, "y": b}
    layers["x"]["ms"][256]["vllm_invariant_ms"] = layers["y"]["ms"][256]["vllm_invariant_ms"] = 2.0
    assert choose.choose(layers, 1.25) == {"x": a, "y": a}
