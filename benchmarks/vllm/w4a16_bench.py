"""The batch-invariant W4A16 linear (builder/backends/vllm/invariant/w4a16.py) on a GPU, alone (no vLLM needed):
a sweep of tile configurations per Llama-3-8B layer shape (choose_tiles picks the shapes' TILES rows: the fastest
at 1 row whose 64 rows stay within M64_BUDGET of cuBLAS fp16), each timed as vLLM runs decode (calls inside a CUDA
graph, over copies of the layer's weights that do not fit the L2 cache together, cuBLAS on copies of the dense
weights likewise), then correctness against a dequantize-then-matmul reference and batch invariance at the chosen
tiles (every row of an M-row call bit-identical to the same row computed alone, M = 1 .. 2048, eager and inside
CUDA graphs of several sizes, replayed on other rows).

    python3 benchmarks/vllm/w4a16_bench.py [--out FILE.json] [--budget SECONDS] [--jobs N]
    python3 benchmarks/vllm/w4a16_bench.py --reference OLD_PLUGIN.py [--out FILE.json]

A configuration that cannot launch (Triton's OutOfResources: shared memory or registers over the GPU's limit) is
reported as "cannot launch: <reason>" and the sweep goes on. --jobs compiles the candidates in that many processes
first (Triton's cache then serves the timing loop). The record at the chosen tiles (per row count, against cuBLAS
fp16, % of the bandwidth bound) is benchmarks/vllm/w4a16_record.py.

--reference: a rework's check. An earlier version of the kernel (e.g. `git show
e17f299:builder/backends/vllm/invariant/plugin.py > old.py`, the kernel before the planes layout, when it still lived
in the plugin's file) and the kernel here
run on the same inputs at every shape, M = 1 .. 256, each with its own rows and weight layout: the elements that
differ are reported (another tile or layout changes the bits, the same way for every row count); the plugin here
must stay invariant and correct at its rows.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import torch

try:
    from benchmarks.vllm.w4a16_choose import M64_BUDGET, choose_tiles, tiles_name
except ImportError:  # run as a script: its own folder is on the path
    from w4a16_choose import M64_BUDGET, choose_tiles, tiles_name

HERE = Path(__file__).resolve().parent
PLUGIN = HERE.parents[1] / "builder" / "backends" / "vllm" / "invariant" / "w4a16.py"
# Llama-3-8B (hidden 4096, 32 heads / 8 KV heads x 128, intermediate 14336): (name, N, K) of each linear per layer
SHAPES = [
    ("qkv_proj", 6144, 4096),
    ("o_proj", 4096, 4096),
    ("gate_up_proj", 28672, 4096),
    ("down_proj", 4096, 14336),
]
LAYERS = 32
GROUP = 128
INVARIANCE_M = [1, 2, 3, 5, 8, 13, 16, 17, 31, 64, 100, 256, 1024, 2048]
GRAPH_M = [1, 2, 8, 16, 64, 256]
L2_BYTES = (
    128 << 20
)  # more than any Hopper's L2: copies of a layer's weights that together exceed it


def candidates_for(n: int, k: int, old_row: tuple | None) -> list[tuple]:
    """The tiles worth timing for an N x K layer (TILE_FIELDS: block_m, block_n, block_k, warps, stages, split):
    the shape's current row, then for each column width and K split that puts 96 .. 1536 programs on the GPU at
    one row (3,072 for columns of 16 or 32): 16, 32 or 64 rows per tile (16 or 32 under narrow columns; one row
    tile up to that many rows: the weights dequantized once), 128 K per step with 3, 4 or 6 stages or 256 with 2, 3
    or 5 (a short slice's loads all in flight at once), 4 warps (and 8 for 64 x 128; 1 or 2 under narrow columns:
    one warp's MMA covers a 16 x 16 tile, so fewer K splits are needed to fill the GPU at one row)."""
    out = [tuple(old_row)] if old_row else []
    for block_n in (16, 32, 64, 128):
        narrow = block_n < 64
        for split in (1, 2, 4, 8, 16):
            programs = n // block_n * split
            if (
                not 96 <= programs <= (3072 if narrow else 1536)
                or k % split
                or (k // split) % GROUP
            ):
                continue
            for block_m in (16, 32) if narrow else (16, 32, 64):
                for block_k, stages in ((128, 3), (128, 4), (128, 6), (256, 2), (256, 3), (256, 5)):
                    if (k // split) % block_k:
                        continue
                    for warps in (
                        (1, 2) if narrow else (4, 8) if block_n * block_m >= 128 * 64 else (4,)
                    ):
                        out.append((block_m, block_n, block_k, warps, stages, split))
    return list(dict.fromkeys(out))


def load_plugin(path: Path = PLUGIN, name: str = "tritonbuild_vllm_invariant"):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_layer(n: int, k: int, seed: int = 0):
    """Random INT4 words [N, K/8] (eight 4-bit values per int32 along K, low nibble first, +8 bias), fp16 scales
    [N, K/G] and the dense fp16 weights they stand for, made on the GPU."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randint(0, 16, (n, k), generator=gen, dtype=torch.int32, device="cuda")
    shifts = torch.arange(8, dtype=torch.int32, device="cuda") * 4
    packed = (q.view(n, k // 8, 8) << shifts).sum(
        -1, dtype=torch.int32
    )  # wraps like the int32 word it is
    scale = (torch.rand((n, k // GROUP), generator=gen, device="cuda") * 0.02 + 0.001).half()
    dense = ((q - 8).half().view(n, k // GROUP, GROUP) * scale[:, :, None]).view(n, k)
    return packed, scale, dense


def copies_for(nbytes: int) -> int:
    return max(2, -(-L2_BYTES // nbytes))


def timed(fn, iters: int = 20, per_graph: int = 32) -> float:
    """Median ms per call of fn(i), run as vLLM runs decode: per_graph calls (i = 0 .. per_graph - 1, each on
    its own copy of the weights) captured in one CUDA graph, replayed iters times (CUDA events, after a warmup)."""
    for i in range(3):
        fn(i)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(per_graph):
            fn(i)
    graph.replay()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / per_graph)
    return sorted(times)[len(times) // 2]


def attempt(fn):
    """fn() or, where it fails, what to report instead: 'cannot launch: <reason>' for a configuration over the
    GPU's resources (Triton's OutOfResources), 'failed: <error>' for anything else."""
    from triton.runtime.errors import OutOfResources

    try:
        return fn()
    except OutOfResources as e:
        return f"cannot launch: {e}"
    except Exception as e:  # noqa: BLE001 - one configuration's failure is reported; the others still run
        return f"failed: {type(e).__name__}: {str(e)[:300]}"


def run_candidates(candidates, run_one) -> dict:
    """{tiles name: run_one(tiles) or why it could not run}, every candidate tried in order."""
    return {tiles_name(tiles): attempt(lambda tiles=tiles: run_one(tiles)) for tiles in candidates}


def _compile_one(job):
    """One process of --jobs: each candidate launched once at the shape (Triton compiles it into its cache)."""
    n, k, candidates = job
    plugin = load_plugin()
    packed, scale, _ = random_layer(n, k)
    x = torch.randn((1, k), device="cuda", dtype=torch.float16)

    def run(tiles):
        plugin.TILES[(n, k)] = tiles
        w, s = plugin.prepare_weights(packed, scale, GROUP)
        plugin.w4a16_matmul(x, w, s, GROUP)
        torch.cuda.synchronize()
        return "compiled"

    return run_candidates(candidates, run)


def precompile(jobs: int, per_shape: dict) -> None:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    work = [
        (n, k, cands[i::jobs])
        for (n, k), cands in per_shape.items()
        for i in range(jobs)
        if cands[i::jobs]
    ]
    with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
        for result in pool.map(_compile_one, work):
            bad = {name: v for name, v in result.items() if v != "compiled"}
            if bad:
                print("precompile:", json.dumps(bad)[:400], flush=True)


def check_layer(plugin, packed, scale, dense, k: int) -> dict:
    """At the shape's TILES row: error against the dequantized fp32 product; rows of M-row calls vs the same rows
    alone (positions 0..63 and each call's last row), eager and in CUDA graphs of GRAPH_M rows replayed twice (the
    second time on the rows reversed, so each row sits elsewhere in its tile)."""
    packed, scale = plugin.prepare_weights(packed, scale, GROUP)
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn((max(INVARIANCE_M), k), generator=gen, device="cuda", dtype=torch.float16)
    ref = x[:64].float() @ dense.float().T
    err = (
        (plugin.w4a16_matmul(x[:64], packed, scale, GROUP).float() - ref).abs().max()
        / ref.abs().max()
    ).item()
    index = sorted(set(range(64)) | {m - 1 for m in INVARIANCE_M + GRAPH_M})
    alone = {
        i: plugin.w4a16_matmul(x[i : i + 1], packed, scale, GROUP)[0].view(torch.int16)
        for i in index
    }

    def differing(y, rows) -> int:
        return sum(
            int((y[p].view(torch.int16) != alone[i]).any())
            for p, i in enumerate(rows)
            if i in alone
        )

    eager = {
        m: differing(plugin.w4a16_matmul(x[:m], packed, scale, GROUP), range(m))
        for m in INVARIANCE_M
    }
    graphs = {}
    for m in GRAPH_M:
        static = x[:m].clone()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = plugin.w4a16_matmul(static, packed, scale, GROUP)
        graph.replay()
        torch.cuda.synchronize()
        first = differing(out, range(m))
        static.copy_(x[:m].flip(0))
        graph.replay()
        torch.cuda.synchronize()
        graphs[m] = first + differing(out, range(m - 1, -1, -1))
    # bf16 activations and scales (the kernel's other dequantization path): product and rows vs alone
    xb, sb = x[:256].bfloat16(), scale.bfloat16()
    yb = plugin.w4a16_matmul(xb[:64], packed, sb, GROUP).float()
    bf16_err = ((yb - ref).abs().max() / ref.abs().max()).item()
    alone_b = torch.cat([plugin.w4a16_matmul(xb[i : i + 1], packed, sb, GROUP) for i in range(64)])
    bf16_rows = {
        m: int((plugin.w4a16_matmul(xb[:m], packed, sb, GROUP)[:64] != alone_b[:m]).any(-1).sum())
        for m in (1, 7, 64, 256)
    }
    return {
        "max_rel_err_vs_dequant_fp32": err,
        "rows_differing_from_alone": eager,
        "graph_rows_differing": graphs,
        "bf16_max_rel_err_vs_dequant_fp32": bf16_err,
        "bf16_rows_differing_from_alone": bf16_rows,
    }


def invariant_and_correct(checks) -> bool:
    """Every layer's check: no row differing from the row alone (eager or in a CUDA graph), and within 1 % of the
    dequantize-then-matmul reference."""
    return all(
        not any(c["rows_differing_from_alone"].values())
        and not any(c["graph_rows_differing"].values())
        and c["max_rel_err_vs_dequant_fp32"] < 1e-2
        and not any(c["bf16_rows_differing_from_alone"].values())
        and c["bf16_max_rel_err_vs_dequant_fp32"] < 1e-2
        for c in checks
    )


def sweep_layer(plugin, n: int, k: int, ms, candidates, deadline: float) -> dict:
    """ms per call of each candidate at each row count (cuBLAS fp16 on the dense weights alongside); candidates
    after the deadline are reported as not run."""
    packed, scale, dense = random_layer(n, k)
    copies = copies_for(packed.numel() * 4)
    dense_copies = [dense.clone() for _ in range(copies_for(dense.numel() * 2))]
    out = {}
    for m in ms:
        x = torch.randn((m, k), device="cuda", dtype=torch.float16)

        def run_one(tiles, x=x):
            if time.time() > deadline:
                return "not run: the sweep's time budget was spent"
            plugin.TILES[(n, k)] = tiles
            w, s = plugin.prepare_weights(packed, scale, GROUP)
            ws = [(w.clone(), s.clone()) for _ in range(copies)]
            return timed(lambda i: plugin.w4a16_matmul(x, *ws[i % copies], GROUP))

        out[m] = {
            "cublas_fp16_ms": timed(lambda i, x=x: x @ dense_copies[i % len(dense_copies)].T),
            **run_candidates(candidates, run_one),
        }
    return out


def sweep(args) -> int:
    plugin = load_plugin()
    own = dict(plugin.TILES)
    per_shape = {(n, k): candidates_for(n, k, own.get((n, k))) for _, n, k in SHAPES}
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "group": GROUP,
        "layers": {},
    }
    result["triton"], result["m64_budget"] = __import__("triton").__version__, M64_BUDGET
    t0 = time.time()
    if args.jobs > 1:
        precompile(args.jobs, per_shape)
        result["precompile_seconds"] = time.time() - t0
        print(f"precompiled in {time.time() - t0:.0f} s", flush=True)
    for i, (name, n, k) in enumerate(SHAPES):
        deadline = t0 + args.budget * (i + 1) / len(SHAPES)
        ms = sweep_layer(plugin, n, k, (1, 64), per_shape[(n, k)], deadline)
        result["layers"][name] = {"N": n, "K": k, "ms": ms, "candidates": per_shape[(n, k)]}
        torch.cuda.empty_cache()
        Path(args.out).write_text(
            json.dumps(result, indent=1)
        )  # what is measured so far survives a timeout
    chosen = choose_tiles(result["layers"])
    for name, entry in result["layers"].items():
        n, k = entry["N"], entry["K"]
        entry["best"] = plugin.TILES[(n, k)] = chosen[name] or own.get((n, k))
        entry["check"] = check_layer(plugin, *random_layer(n, k, seed=2), k)
        for m, row in entry["ms"].items():
            best, old = row.get(tiles_name(entry["best"])), row.get(tiles_name(own[(n, k)]))
            print(
                f"{name} M={m} cuBLAS {row['cublas_fp16_ms']:.4f} ms; best {entry['best']} {best}; old {old}"
            )
        print(name, "check", json.dumps(entry["check"]), flush=True)
    result["tiles"] = {f"{e['N']}x{e['K']}": e["best"] for e in result["layers"].values()}
    result["seconds"] = time.time() - t0
    result["invariant_and_correct"] = invariant_and_correct(
        e["check"] for e in result["layers"].values()
    )
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(
        "TILES",
        json.dumps(result["tiles"]),
        "invariant and correct:",
        result["invariant_and_correct"],
    )
    return 0 if result["invariant_and_correct"] else 1


def compare_plugins(plugin, reference) -> dict:
    """Elements that differ between the two plugins' outputs over M = 1 .. 256, per shape, each at its own TILES
    row and weight layout (reported: another tile or layout may change the bits, the same way for every row
    count); the plugin here must stay invariant and correct at its rows."""
    result, ms = {"layers": {}}, [1, 2, 7, 16, 64, 256]
    for name, n, k in SHAPES:
        packed, scale, dense = random_layer(n, k)
        x = torch.randn((max(ms), k), device="cuda", dtype=torch.float16)
        prepare = getattr(reference, "prepare_weights", lambda w, s, g: (w, s))
        old_w, old_s = prepare(packed, scale, GROUP)
        w, s = plugin.prepare_weights(packed, scale, GROUP)
        differing = attempt(
            lambda x=x, w=w, s=s, old_w=old_w, old_s=old_s: sum(
                int(
                    (
                        plugin.w4a16_matmul(x[:m], w, s, GROUP)
                        != reference.w4a16_matmul(x[:m], old_w, old_s, GROUP)
                    ).sum()
                )
                for m in ms
            )
        )
        entry = {
            "reference_row": tuple(reference.TILES[(n, k)]),
            "own_row": tuple(plugin.TILES[(n, k)]),
            "differing_elements": differing,
            "check": check_layer(plugin, packed, scale, dense, k),
        }
        result["layers"][name] = entry
        print(name, json.dumps(entry), flush=True)
        torch.cuda.empty_cache()
    result["invariant_and_correct"] = invariant_and_correct(
        e["check"] for e in result["layers"].values()
    )
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="w4a16-bench.json")
    ap.add_argument(
        "--budget", type=float, default=400, help="seconds for the sweep's timing, over all shapes"
    )
    ap.add_argument("--jobs", type=int, default=1, help="processes compiling the candidates first")
    ap.add_argument("--reference", type=Path, help="an earlier plugin file: outputs must match it")
    args = ap.parse_args()
    if not args.reference:
        return sweep(args)
    reference = load_plugin(args.reference, "tritonbuild_vllm_invariant_reference")
    result = compare_plugins(load_plugin(), reference)
    result.update(
        gpu=torch.cuda.get_device_name(),
        torch=torch.__version__,
        triton=__import__("triton").__version__,
    )
    Path(args.out).write_text(json.dumps(result, indent=1))
    print("invariant and correct:", result["invariant_and_correct"])
    return 0 if result["invariant_and_correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
