"""benchmarks/vllm/w4a16_bench.py on the CPU: a tile configuration that cannot launch (Triton's
OutOfResources: on an H100 one candidate needed 241,664 bytes of shared memory against 232,448, and
`--reference` died on it) is reported as such and the candidates after it still run; the tiles a
sweep picks skip it; its candidates are tiles the plugin takes; the record's arithmetic (bandwidth
fraction, 32 layers) is what it says."""

from __future__ import annotations

import os

import pytest

# NOTE: Triton decides at its import whether its library's jit functions (tl.zeros ...) are interpreted: imported
# here first without TRITON_INTERPRET, the kernel tests after this module in the same process (test_vllm_invariant)
# failed with "Cannot call @triton.jit'd outside of the scope of a kernel"
os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("torch")
triton_errors = pytest.importorskip("triton.runtime.errors")

from benchmarks.vllm import w4a16_bench as bench  # noqa: E402
from benchmarks.vllm import w4a16_choose as choose  # noqa: E402
from benchmarks.vllm import w4a16_record as record  # noqa: E402

TOO_BIG = (16, 256, 128, 8, 4, 1, 0, 0, 0, 0)


def _fake_kernel(tiles):
    """A kernel launch the way Triton fails it: OutOfResources raised at the launch of one config."""
    if tiles == TOO_BIG:
        raise triton_errors.OutOfResources(241664, 232448, "shared memory")
    return 0.01 * tiles[1] / 64


def test_a_config_that_cannot_launch_is_reported_and_the_loop_goes_on():
    candidates = [(16, 64, 128, 4, 4, 4, 1, 1, 1, 1), TOO_BIG, (16, 128, 128, 4, 4, 4, 1, 1, 1, 1)]
    row = bench.run_candidates(candidates, _fake_kernel)
    assert list(row) == [bench.tiles_name(c) for c in candidates]
    assert row[bench.tiles_name(TOO_BIG)].startswith("cannot launch: ")
    assert (
        "shared memory, Required: 241664, Hardware limit: 232448" in row[bench.tiles_name(TOO_BIG)]
    )
    assert row[bench.tiles_name(candidates[0])] == pytest.approx(0.01)
    assert row[bench.tiles_name(candidates[2])] == pytest.approx(0.02)


def test_any_other_failure_of_one_config_is_reported_as_failed_not_as_cannot_launch():
    def broken(tiles):
        raise RuntimeError("an illegal memory access")

    row = bench.run_candidates([(*TOO_BIG[:1], 64, *TOO_BIG[2:])], broken)
    assert list(row.values()) == ["failed: RuntimeError: an illegal memory access"]


def test_the_best_tiles_skip_a_config_that_could_not_launch():
    candidates = [TOO_BIG, (16, 128, 128, 4, 4, 4, 1, 1, 1, 1), (16, 64, 128, 4, 4, 4, 1, 1, 1, 1)]
    rows = {m: bench.run_candidates(candidates, _fake_kernel) for m in (1, 64)}
    assert choose.best_tiles(rows, candidates) == candidates[2]
    # none launched at all: no tiles, not the first candidate by default
    assert (
        choose.best_tiles({1: {bench.tiles_name(TOO_BIG): "cannot launch: x"}}, [TOO_BIG]) is None
    )


def _layer(rows, cublas_64):
    """A sweep's entry: {M: {tiles name: ms}} for the candidates (ms at 1 row, ms at 64 rows)."""
    candidates = list(rows)
    ms = {1: {bench.tiles_name(t): a for t, (a, _) in rows.items()}, 64: {}}
    ms[64] = {bench.tiles_name(t): b for t, (_, b) in rows.items()} | {"cublas_fp16_ms": cublas_64}
    return {"ms": ms, "candidates": candidates}


def test_the_chosen_rows_are_the_fastest_at_one_row_within_the_64_row_budget():
    """Two layers, cuBLAS fp16 1.0 ms at 64 rows each (budget 0.8 x 2.0 = 1.6 ms): the fastest pair at one row
    (0.1 + 0.2) takes 1.9 ms at 64 rows, over the budget; the next (0.1 + 0.3) takes 1.5 ms and is kept. A row that
    could not launch is never chosen; with no pair inside the budget each layer falls back to its best sum."""
    a, b, c, d = (
        (16, 64, 128, 4, 3, 1),
        (64, 64, 128, 4, 3, 1),
        (16, 64, 256, 4, 3, 4),
        (32, 64, 128, 4, 3, 4),
    )
    layers = {
        "x": _layer({a: (0.1, 0.7), b: (0.4, 0.3)}, 1.0),
        "y": _layer({c: (0.2, 1.2), d: (0.3, 0.8), TOO_BIG: (0.05, 0.1)}, 1.0),
    }
    layers["y"]["ms"][1][bench.tiles_name(TOO_BIG)] = "cannot launch: shared memory"
    assert choose.choose_tiles(layers, 0.8) == {"x": a, "y": d}
    assert choose.choose_tiles(layers, 0.1) == {"x": b, "y": d}


def test_the_sweeps_candidates_are_tiles_the_kernel_takes_at_each_llama_shape():
    """Every candidate is a TILES row of the plugin (its fields), keeps its K slices whole steps of
    its BLOCK_K and whole groups, and puts 96 .. 1536 programs on the GPU at one row (3,072 under
    columns of 16 or 32, with 1 or 2 warps); the shape's current row comes first (a sweep never
    loses it)."""
    plugin = bench.load_plugin()
    for _, n, k in bench.SHAPES:
        candidates = bench.candidates_for(n, k, plugin.TILES[(n, k)])
        assert candidates[0] == plugin.TILES[(n, k)] and len(set(candidates)) == len(candidates)
        for tiles in candidates:
            block_m, block_n, block_k, warps, _, split = tiles
            narrow = block_n < 64
            assert block_m in (16, 32, 64) and block_k in (128, 256)
            assert warps in ((1, 2) if narrow else (4, 8)) and block_n in (16, 32, 64, 128)
            assert (k // split) % block_k == 0 and (k // split) % bench.GROUP == 0
            plugin.TILES[(n, k)] = tiles  # taken as it is, not adjusted
            assert plugin.tiles_for(n, k, bench.GROUP) == tiles
        assert all(96 <= n // c[1] * c[5] <= (3072 if c[1] < 64 else 1536) for c in candidates[1:])
        assert any(c[1] < 64 for c in candidates)


def test_the_bandwidth_fraction_is_the_bound_over_the_time():
    # 3.6 GB at 3.35 TB/s is 1.0746 ms; measured 2.149 ms is half the bound
    assert record.bandwidth_fraction(3.6e9, 3.35e12, 2.149) == pytest.approx(0.5, rel=1e-3)
    assert record.int4_bytes(4096, 4096, 128) == 4096 * 4096 // 2 + 4096 * 32 * 2


def test_the_peak_bandwidth_is_known_for_the_gpus_the_device_lends_and_unknown_otherwise():
    assert record.peak_bandwidth("NVIDIA H100 80GB HBM3") == 3.35e12
    assert record.peak_bandwidth("NVIDIA H200") == 4.8e12
    assert record.peak_bandwidth("NVIDIA H100 PCIe") == 2.0e12
    assert record.peak_bandwidth("Tesla T4") is None
