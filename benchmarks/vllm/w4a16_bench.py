"""The batch-invariant W4A16 linear (builder/backends/vllm/invariant/plugin.py) on a GPU, alone (no vLLM needed):
correctness against a dequantize-then-matmul reference, batch invariance (every row of an M-row call bit-identical to
the same row computed alone, M = 1 .. 2048, eager and inside a CUDA graph), and speed at Llama-3-8B's layer shapes
against cuBLAS fp16 on the dense weights, for each candidate tile config (the fastest becomes the shape's TILES row).

    python3 benchmarks/vllm/w4a16_bench.py [--out FILE.json] [--quick]
    python3 benchmarks/vllm/w4a16_bench.py --reference OLD_PLUGIN.py [--out FILE.json]

--reference: a refactor's check. The plugin here and an earlier version of it (e.g. `git show
REV:builder/backends/vllm/invariant/plugin.py > old.py`) run on the same inputs at every shape, for the
shape's TILES row and each --quick candidate, M = 1 .. 256; every output must be bit-identical, and the
plugin here must stay invariant and correct (the checks above, at the TILES rows).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
PLUGIN = HERE.parents[1] / "builder" / "backends" / "vllm" / "invariant" / "plugin.py"
# Llama-3-8B (hidden 4096, 32 heads / 8 KV heads x 128, intermediate 14336): (name, N, K) of each linear per layer
SHAPES = [
    ("qkv_proj", 6144, 4096),
    ("o_proj", 4096, 4096),
    ("gate_up_proj", 28672, 4096),
    ("down_proj", 4096, 14336),
]
LAYERS = 32
GROUP = 128
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, SPLIT, GATHER): the plugin's TILES rows to try
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, SPLIT, GATHER, KN): the plugin's TILES rows to try
CANDIDATES = (
    [
        (16, bn, bk, 4, 4, split, gather, 0)
        for bn in (16, 32, 64, 128)
        for bk in (64, 128)
        for split in (1, 2, 4, 8)
        for gather in (0, 1)
    ]
    + [
        (16, bn, bk, warps, 4, split, 0, 1)
        for bn in (32, 64, 128, 256)
        for bk in (64, 128)
        for warps in (4, 8)
        for split in (1, 4)
    ]
    + [(64, 128, 64, 4, 4, 1, 0, 0), (128, 128, 64, 8, 3, 1, 0, 0)]
)
# --quick: the candidates worth a short device call: the fastest of 2026-12-04's run per shape, and the KN layout
# (weights [K/8, N], loads along N) untried on a GPU then
QUICK = [
    (16, 128, 64, 4, 4, 8, 0, 0),
    (16, 32, 128, 4, 4, 4, 0, 0),
    (64, 128, 64, 4, 4, 1, 0, 0),
    (16, 64, 128, 4, 4, 4, 0, 1),
    (16, 128, 128, 4, 4, 4, 0, 1),
    (16, 128, 64, 8, 4, 1, 0, 1),
    (16, 256, 64, 8, 4, 1, 0, 1),
    (16, 64, 64, 4, 4, 8, 0, 1),
    (64, 128, 64, 4, 4, 1, 0, 1),
    (16, 128, 128, 8, 4, 8, 0, 1),
]
INVARIANCE_M = [1, 2, 3, 5, 8, 13, 16, 17, 31, 64, 100, 256, 1024, 2048]


def load_plugin(path: Path = PLUGIN, name: str = "tritonbuild_vllm_invariant"):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_layer(n: int, k: int, gen: torch.Generator):
    q = torch.randint(0, 16, (n, k), generator=gen, dtype=torch.int32)
    shifts = torch.arange(8, dtype=torch.int64) * 4
    packed = (q.view(n, k // 8, 8).to(torch.int64) << shifts).sum(-1)
    packed = packed.where(packed < 2**31, packed - 2**32).to(torch.int32)
    scale = (torch.rand((n, k // GROUP), generator=gen) * 0.02 + 0.001).to(torch.float16)
    dense = ((q - 8).to(torch.float16).view(n, k // GROUP, GROUP) * scale[:, :, None]).view(n, k)
    return packed.cuda(), scale.cuda(), dense.cuda()


def timed(fn, iters: int, per_graph: int = 20) -> float:
    """Median ms per call of fn, run as vLLM runs decode: per_graph calls captured in one CUDA graph (no launch
    overhead), replayed iters times (CUDA events, after a warmup)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(per_graph):
            fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / per_graph)
    return sorted(times)[len(times) // 2]


def check_layer(plugin, packed, scale, dense, k: int) -> dict:
    packed, scale = plugin.prepare_weights(
        packed, scale, GROUP
    )  # the layout the shape's TILES row reads
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn((max(INVARIANCE_M), k), generator=gen, device="cuda", dtype=torch.float16)
    ref = x[:64].float() @ dense.float().T
    got = plugin.w4a16_matmul(x[:64], packed, scale, GROUP).float()
    err = ((got - ref).abs().max() / ref.abs().max()).item()
    alone = torch.cat([plugin.w4a16_matmul(x[i : i + 1], packed, scale, GROUP) for i in range(16)])
    differing = {}
    for m in INVARIANCE_M:
        y = plugin.w4a16_matmul(x[:m], packed, scale, GROUP)
        rows = min(m, 16)
        differing[m] = int(
            (y[:rows].view(torch.int16) != alone[:rows].view(torch.int16)).any(-1).sum()
        )
    # inside a CUDA graph: the padded batch of a graph replay must give the eager row's bits
    static = x[:8].clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = plugin.w4a16_matmul(static, packed, scale, GROUP)
    graph.replay()
    torch.cuda.synchronize()
    graph_rows = int((out.view(torch.int16) != alone[:8].view(torch.int16)).any(-1).sum())
    return {
        "max_rel_err_vs_dequant_fp32": err,
        "rows_differing_from_alone": differing,
        "graph_rows_differing": graph_rows,
    }


def bench_layer(plugin, packed, scale, dense, n: int, k: int, ms: list[int], candidates) -> dict:
    out = {}
    for m in ms:
        x = torch.randn((m, k), device="cuda", dtype=torch.float16)
        row = {"cublas_fp16_ms": timed(lambda x=x: x @ dense.T, 20)}
        for tiles in candidates:
            plugin.TILES[(n, k)] = tiles
            try:
                weights, scales = plugin.prepare_weights(packed, scale, GROUP)
                row["x".join(map(str, tiles))] = timed(
                    lambda x=x, weights=weights, scales=scales: plugin.w4a16_matmul(
                        x, weights, scales, GROUP
                    ),
                    20,
                )
            except Exception as e:  # noqa: BLE001 - a tile config the compiler refuses (shared memory) is reported
                row["x".join(map(str, tiles))] = f"{type(e).__name__}: {str(e)[:120]}"
        plugin.TILES.pop((n, k), None)
        out[m] = row
    return out


def best_tiles(rows: dict, candidates) -> tuple:
    """The candidate with the least time summed over the measured row counts (decode at 1 and at 64 streams)."""

    def total(tiles):
        values = [row.get("x".join(map(str, tiles))) for row in rows.values()]
        return sum(values) if all(isinstance(v, float) for v in values) else float("inf")

    return min(candidates, key=total)


COMPARE_M = [1, 2, 7, 16, 64, 256]


def compare_plugins(plugin, reference, gen: torch.Generator) -> dict:
    """Elements that differ between the two plugins' outputs, per shape and tile row, over COMPARE_M."""
    result, own = {"layers": {}}, dict(plugin.TILES)
    for name, n, k in SHAPES:
        packed, scale, dense = random_layer(n, k, gen)
        x = torch.randn((max(COMPARE_M), k), device="cuda", dtype=torch.float16)
        rows = {}
        for tiles in [plugin.TILES[(n, k)], *QUICK]:
            differing = 0
            for module in (plugin, reference):
                module.TILES[(n, k)] = tiles
            weights, scales = plugin.prepare_weights(packed, scale, GROUP)
            old_weights, old_scales = reference.prepare_weights(packed, scale, GROUP)
            for m in COMPARE_M:
                new = plugin.w4a16_matmul(x[:m], weights, scales, GROUP).view(torch.int16)
                old = reference.w4a16_matmul(x[:m], old_weights, old_scales, GROUP)
                differing += int((new != old.view(torch.int16)).sum())
            rows["x".join(map(str, tiles))] = differing
        for module in (plugin, reference):  # back to the plugin's own rows
            module.TILES.update(own)
        entry = {"differing_elements": rows, "check": check_layer(plugin, packed, scale, dense, k)}
        result["layers"][name] = entry
        print(name, json.dumps(entry), flush=True)
        del packed, scale, dense
        torch.cuda.empty_cache()
    result["identical"] = all(
        not any(e["differing_elements"].values()) for e in result["layers"].values()
    )
    result["invariant_and_correct"] = invariant_and_correct(result["layers"])
    return result


def invariant_and_correct(layers: dict) -> bool:
    """Every layer's check: no row differing from the row alone (eager or in a CUDA graph), and
    within 1 % of the dequantize-then-matmul reference."""
    return all(
        not any(e["check"]["rows_differing_from_alone"].values())
        and not e["check"]["graph_rows_differing"]
        and e["check"]["max_rel_err_vs_dequant_fp32"] < 1e-2
        for e in layers.values()
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="w4a16-bench.json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reference", type=Path, help="an earlier plugin file: outputs must match it")
    args = ap.parse_args()
    if args.reference:
        reference = load_plugin(args.reference, "tritonbuild_vllm_invariant_reference")
        result = compare_plugins(load_plugin(), reference, torch.Generator().manual_seed(0))
        result.update(gpu=torch.cuda.get_device_name(), torch=torch.__version__)
        result["triton"] = __import__("triton").__version__
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(
            "identical:",
            result["identical"],
            "invariant and correct:",
            result["invariant_and_correct"],
        )
        return 0 if result["identical"] and result["invariant_and_correct"] else 1
    plugin = load_plugin()
    gen = torch.Generator().manual_seed(0)
    ms = [1, 64] if args.quick else [1, 64, 256]
    candidates = QUICK if args.quick else CANDIDATES
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "group": GROUP,
        "layers": {},
    }
    t0 = time.time()
    for name, n, k in SHAPES:
        packed, scale, dense = random_layer(n, k, gen)
        entry = {
            "N": n,
            "K": k,
            "ms": bench_layer(plugin, packed, scale, dense, n, k, ms, candidates),
        }
        entry["best"] = best_tiles(entry["ms"], candidates)
        plugin.TILES[(n, k)] = entry[
            "best"
        ]  # the shape's row: invariance and correctness checked with it
        entry["check"] = check_layer(plugin, packed, scale, dense, k)
        result["layers"][name] = entry
        print(name, json.dumps(entry["check"]), flush=True)
        for m, row in entry["ms"].items():
            best = "x".join(map(str, entry["best"]))
            print(
                f"  M={m} cuBLAS fp16 {row['cublas_fp16_ms']:.4f} ms, best {best} {row[best]:.4f} ms",
                flush=True,
            )
        del packed, scale, dense
        torch.cuda.empty_cache()
        Path(args.out).write_text(
            json.dumps(result, indent=1)
        )  # what is measured so far survives a timeout
    # per token at 1 stream: the best config of each shape, over 32 layers, vs cuBLAS fp16
    for m in ms:
        best = cublas = 0.0
        for entry in result["layers"].values():
            row = entry["ms"][m]
            best += row["x".join(map(str, entry["best"]))] * LAYERS
            cublas += row["cublas_fp16_ms"] * LAYERS
        result[f"linears_ms_per_step_M{m}"] = {
            "int4_invariant_best": best,
            "fp16_cublas": cublas,
            "speedup": cublas / best if best else None,
        }
        print(
            f"M={m}: linears per step int4 invariant {best:.3f} ms, fp16 cuBLAS {cublas:.3f} ms",
            flush=True,
        )
    result["tiles"] = {f"{e['N']}x{e['K']}": e["best"] for e in result["layers"].values()}
    print("TILES", json.dumps(result["tiles"]), flush=True)
    result["seconds"] = time.time() - t0
    Path(args.out).write_text(json.dumps(result, indent=1))
    ok = invariant_and_correct(result["layers"])
    print("invariant and correct:", ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
