"""The batch-invariant fp16/bf16 linear (builder/backends/vllm/invariant/linear16.py) on a GPU, alone (no vLLM
installed), at Llama-3-8B's linear shapes, in one command: a sweep of tile configurations per shape at 1 and 64 rows
(linear16_choose.choose keeps the fastest at 1 row whose 256 rows are no slower than vLLM's batch-invariant linear and
whose 64 rows stay within --m64-budget of cuBLAS fp16), then
the record at those tiles: per row count M = 1 .. 256, the 32 layers' linears per decode step with the kernel, with
cuBLAS fp16 (torch.nn.functional.linear) and with vLLM 0.22's batch-invariant linear (what UnquantizedLinearMethod
runs under VLLM_BATCH_INVARIANT=1: linear_batch_invariant -> matmul_persistent, vLLM's own file loaded alone, see
load_vllm_batch_invariant), each layer its own copy of the weights, the 32 calls of a shape in one CUDA graph; then
the invariance checks at the chosen tiles (rows vs alone for M = 1 .. 2048, CUDA graphs of 1 .. 256 rows replayed on
other rows, fp16 and bf16, error against the fp32 product).

    unzip -p vllm-0.22.0-cp38-abi3-manylinux_2_28_x86_64.whl vllm/model_executor/layers/batch_invariant.py > bi.py
    python3 benchmarks/vllm/linear16_bench.py --vllm-batch-invariant bi.py --jobs 16 --out FILE.json
        [--tiles FILE.json (an earlier output's tiles: no sweep)] [--budget SECONDS] [--m64-budget 1.25]

(`pip download vllm==0.22.0 --no-deps` fetches the wheel.) A configuration that cannot launch is reported as such and
the sweep goes on; what is measured so far is written to --out after each stage.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

try:
    from benchmarks.vllm import w4a16_bench as bench
    from benchmarks.vllm import w4a16_record as record
    from benchmarks.vllm.linear16_choose import SWEEP_M, choose
    from benchmarks.vllm.vllm_batch_invariant import load_vllm_batch_invariant
except ImportError:  # run as a script: its own folder is on the path
    import w4a16_bench as bench
    import w4a16_record as record
    from linear16_choose import SWEEP_M, choose
    from vllm_batch_invariant import load_vllm_batch_invariant

KERNEL = bench.PLUGIN.with_name("linear16.py")
M64_BUDGET = 1.25
SMEM_LIMIT = (
    200 * 1024
)  # bytes of shared memory a candidate's stages may take (H100 / H200: 227 KiB per block)


def load_kernel(path: Path = KERNEL, name: str = "tritonbuild_linear16"):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def candidates_for(n: int, k: int) -> list[tuple]:
    """Tiles (block_m, block_n, block_k, warps, stages, split) for an N x K layer: 64 or 128 columns with a K split
    that puts 128 .. 1,100 programs on the GPU at one row, slices of whole steps; 16, 32 or 64 rows per tile; 64 K
    per step with 6 stages, 128 with 4 or 256 with 3, where the stages fit SMEM_LIMIT; 8 warps for 128 x 64 tiles."""
    out = []
    for block_n in (64, 128):
        for split in (1, 2, 4, 8):
            programs = -(-n // block_n) * split
            if not 128 <= programs <= 1100 or k % split:
                continue
            for block_m in (16, 32, 64):
                for block_k, stages in ((64, 6), (128, 4), (256, 3)):
                    if (k // split) % block_k or (
                        block_n + block_m
                    ) * block_k * 2 * stages > SMEM_LIMIT:
                        continue
                    warps = 8 if block_n * block_m >= 128 * 64 else 4
                    out.append((block_m, block_n, block_k, warps, stages, split))
    return out


def dense_layer(n: int, k: int, dtype=torch.float16, seed: int = 0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn((n, k), generator=gen, device="cuda") * 0.02).to(dtype)


def _compile_one(job):
    """One process of --jobs: each candidate launched once at the shape (Triton compiles it into its cache)."""
    n, k, candidates = job
    kernel = load_kernel()
    w, x = dense_layer(n, k), torch.randn((1, k), device="cuda", dtype=torch.float16)

    def run(tiles):
        kernel.TILES[(n, k)] = tiles
        kernel.linear16(x, w)
        torch.cuda.synchronize()
        return "compiled"

    return bench.run_candidates(candidates, run)


def precompile(jobs: int, per_shape: dict) -> None:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    work = [
        (n, k, c[i::jobs]) for (n, k), c in per_shape.items() for i in range(jobs) if c[i::jobs]
    ]
    with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
        for result in pool.map(_compile_one, work):
            bad = {name: v for name, v in result.items() if v != "compiled"}
            if bad:
                print("precompile:", json.dumps(bad)[:400], flush=True)


def sweep_layer(kernel, vllm_bi, n: int, k: int, candidates, deadline: float) -> dict:
    """{M: {tiles name: ms per call}} at SWEEP_M rows, cuBLAS fp16 and vLLM's batch-invariant linear alongside, on
    copies of the weights that do not fit the L2 cache together; candidates after the deadline are not run."""
    w = dense_layer(n, k)
    copies = [w.clone() for _ in range(bench.copies_for(w.numel() * 2))]
    ms = {}
    for m in SWEEP_M:
        x = torch.randn((m, k), device="cuda", dtype=torch.float16)

        def run_one(tiles, x=x):
            if time.time() > deadline:
                return "not run: the sweep's time budget was spent"
            kernel.TILES[(n, k)] = tiles
            return bench.timed(lambda i: kernel.linear16(x, copies[i % len(copies)]))

        ms[m] = {"cublas_fp16_ms": bench.timed(lambda i, x=x: F.linear(x, copies[i % len(copies)]))}
        if vllm_bi is not None:
            ms[m]["vllm_invariant_ms"] = bench.attempt(
                lambda x=x: bench.timed(
                    lambda i: vllm_bi.linear_batch_invariant(x, copies[i % len(copies)])
                )
            )
        ms[m].update(bench.run_candidates(candidates, run_one))
    return ms


def sweep(kernel, vllm_bi, args, result: dict) -> dict:
    """{shape name: tiles}: each candidate at SWEEP_M rows, chosen by choose."""
    per_shape = {(n, k): candidates_for(n, k) for _, n, k in bench.SHAPES}
    t0 = time.time()
    if args.jobs > 1:
        precompile(args.jobs, per_shape)
        result["precompile_seconds"] = time.time() - t0
    layers = result.setdefault("sweep", {})
    for i, (name, n, k) in enumerate(bench.SHAPES):
        deadline = t0 + args.budget * (i + 1) / len(bench.SHAPES)
        ms = sweep_layer(kernel, vllm_bi, n, k, per_shape[(n, k)], deadline)
        layers[name] = {"N": n, "K": k, "ms": ms, "candidates": per_shape[(n, k)]}
        torch.cuda.empty_cache()
        Path(args.out).write_text(json.dumps(result, indent=1))
    result["sweep_seconds"] = time.time() - t0
    return choose(layers, args.m64_budget)


def shape_times(kernel, vllm_bi, n: int, k: int, layers: int = bench.LAYERS) -> dict:
    """ms per call at each M of the shape: the kernel, cuBLAS fp16 and vLLM's batch-invariant linear, on `layers`
    copies of the dense weights (one per layer; the 32 calls of a graph go round them)."""
    w = dense_layer(n, k)
    copies = [w.clone() for _ in range(layers)]
    out = {}
    for m in record.M_VALUES:
        x = torch.randn((m, k), device="cuda", dtype=torch.float16)
        row = {
            "fp16_invariant": bench.attempt(
                lambda x=x: bench.timed(lambda i: kernel.linear16(x, copies[i % layers]))
            ),
            "fp16_cublas": bench.timed(lambda i, x=x: F.linear(x, copies[i % layers])),
        }
        if vllm_bi is not None:
            row["fp16_vllm_invariant"] = bench.attempt(
                lambda x=x: bench.timed(
                    lambda i: vllm_bi.linear_batch_invariant(x, copies[i % layers])
                )
            )
        out[m] = row
    return out


def summarize(per_shape: dict, gpu: str, copy_bw: float, vllm_reason: str | None) -> dict:
    """Per M: the 32 layers' linears per step (ms) for each, the kernel's bandwidth fraction and its speed-ups."""
    nbytes = sum(n * k * 2 for _, n, k in bench.SHAPES) * bench.LAYERS
    peak, kernel = record.peak_bandwidth(gpu), {}
    for m in record.M_VALUES:

        def step(name, m=m):
            values = [per_shape[s][m].get(name) for s, _, _ in bench.SHAPES]
            return sum(values) * bench.LAYERS if all(isinstance(v, float) for v in values) else None

        ms, cublas, vllm_ms = (
            step("fp16_invariant"),
            step("fp16_cublas"),
            step("fp16_vllm_invariant"),
        )
        kernel[m] = {
            "fp16_invariant_ms": ms,
            "fp16_cublas_ms": cublas,
            "fp16_vllm_invariant_ms": vllm_ms,
            "bandwidth_fraction": record.bandwidth_fraction(nbytes, peak, ms)
            if peak and ms
            else None,
            "cublas_bandwidth_fraction": record.bandwidth_fraction(nbytes, peak, cublas)
            if peak
            else None,
            "speedup_vs_vllm_invariant": vllm_ms / ms if ms and vllm_ms else None,
            "vs_fp16_cublas": cublas / ms if ms else None,
            "per_layer_us": {
                s: {
                    key: (v * 1e3 if isinstance(v, float) else v)
                    for key, v in per_shape[s][m].items()
                }
                for s, _, _ in bench.SHAPES
            },
        }
        if vllm_reason:
            kernel[m]["fp16_vllm_invariant_skipped"] = vllm_reason
    bound = nbytes / peak * 1e3 if peak else None
    return {
        "kernel": kernel,
        "bandwidth": {"fp16_bytes_per_step": nbytes, "peak_bytes_per_s": peak, "bound_ms": bound,
                      "measured_copy_bytes_per_s": copy_bw},
    }  # fmt: skip


def check_dtype(kernel, n: int, k: int, dtype) -> dict:
    """At the shape's tiles: error against the fp32 product; rows of M-row calls vs the same rows alone (positions
    0..63 and each call's last row), eager for M = 1 .. 2048 and in CUDA graphs of GRAPH_M rows replayed twice (the
    second time on the rows reversed, so each row sits elsewhere in its tile)."""
    w = dense_layer(n, k, dtype, seed=2)
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn((max(bench.INVARIANCE_M), k), generator=gen, device="cuda").to(dtype)
    ref = x[:64].float() @ w.float().T
    err = ((kernel.linear16(x[:64], w).float() - ref).abs().max() / ref.abs().max()).item()
    index = sorted(set(range(64)) | {m - 1 for m in bench.INVARIANCE_M + bench.GRAPH_M})
    alone = {i: kernel.linear16(x[i : i + 1], w)[0].view(torch.int16) for i in index}

    def differing(y, rows) -> int:
        return sum(
            int((y[p].view(torch.int16) != alone[i]).any())
            for p, i in enumerate(rows)
            if i in alone
        )

    eager = {m: differing(kernel.linear16(x[:m], w), range(m)) for m in bench.INVARIANCE_M}
    graphs = {}
    for m in bench.GRAPH_M:
        static, graph = x[:m].clone(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = kernel.linear16(static, w)
        graph.replay()
        torch.cuda.synchronize()
        first = differing(y, range(m))
        static.copy_(x[:m].flip(0))
        graph.replay()
        torch.cuda.synchronize()
        graphs[m] = first + differing(y, range(m - 1, -1, -1))
    return {
        "max_rel_err_vs_fp32": err,
        "rows_differing_from_alone": eager,
        "graph_rows_differing": graphs,
    }


def check_layer(kernel, n: int, k: int) -> dict:
    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
    return {name: check_dtype(kernel, n, k, dtype) for name, dtype in dtypes.items()}


def checks_passed(name: str, c: dict) -> dict:
    graphs = "_".join(map(str, bench.GRAPH_M))
    out = {}
    for dtype, d in c.items():
        tolerance = 1e-2 if dtype == "bf16" else 2e-3
        out[f"{name}_{dtype}_rows_vs_alone_M1_2048"] = not any(
            d["rows_differing_from_alone"].values()
        )
        out[f"{name}_{dtype}_cuda_graphs_M{graphs}"] = not any(d["graph_rows_differing"].values())
        out[f"{name}_{dtype}_within_{tolerance:g}_of_fp32"] = d["max_rel_err_vs_fp32"] < tolerance
    return out


def measure(kernel, vllm_bi, vllm_reason, result: dict, out: Path) -> None:
    """The record at the kernel's TILES: times and checks per shape (written to out after each), then the summary."""
    per_shape, checks = (
        result.setdefault("per_shape", {}),
        result.setdefault("invariance_detail", {}),
    )
    for name, n, k in bench.SHAPES:
        per_shape[name] = shape_times(kernel, vllm_bi, n, k)
        checks[name] = check_layer(kernel, n, k)
        passed = checks_passed(name, checks[name])
        print(name, json.dumps(per_shape[name][1]), json.dumps(passed), flush=True)
        torch.cuda.empty_cache()
        out.write_text(json.dumps(result, indent=1))
    gpu = result["machine"]["gpu"]
    result.update(summarize(per_shape, gpu, record.copy_bandwidth(), vllm_reason))
    result["invariance_checks"] = {
        key: v for name, c in checks.items() for key, v in checks_passed(name, c).items()
    }


def machine() -> dict:
    props = torch.cuda.get_device_properties(0)
    return {"gpu": torch.cuda.get_device_name(), "sms": props.multi_processor_count,
            "capability": list(torch.cuda.get_device_capability()), "torch": torch.__version__,
            "triton": __import__("triton").__version__, "cuda": torch.version.cuda}  # fmt: skip


def arguments(out: str, budget: float) -> argparse.ArgumentParser:
    """The options this benchmark and linear16_lm_head.py share."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=out)
    ap.add_argument(
        "--vllm-batch-invariant",
        type=Path,
        help="vLLM 0.22.0's batch_invariant.py (from its wheel)",
    )
    ap.add_argument(
        "--budget",
        type=float,
        default=budget,
        help="seconds for the sweep's timing, over all shapes",
    )
    ap.add_argument(
        "--jobs", type=int, default=1, help="processes compiling the sweep's candidates first"
    )
    ap.add_argument(
        "--m64-budget", type=float, default=M64_BUDGET, help="64 rows within this x cuBLAS fp16"
    )
    return ap


def vllm_linear(path: Path | None):
    """(vLLM's batch-invariant module, None) from --vllm-batch-invariant, or (None, why it is not timed)."""
    if path is None:
        return None, "no --vllm-batch-invariant file given"
    module = bench.attempt(lambda: load_vllm_batch_invariant(path))
    return (None, module) if isinstance(module, str) else (module, None)


def main() -> int:
    ap = arguments("linear16-bench.json", 120)
    ap.add_argument("--tiles", type=Path, help="an earlier output: its tiles, no sweep")
    ap.add_argument(
        "--no-pdl", action="store_true", help="the kernel without programmatic dependent launch"
    )
    args = ap.parse_args()
    t0, kernel = time.time(), load_kernel()
    kernel.USE_PDL = not args.no_pdl
    result = {
        "what": "issue 45 item 2: the batch-invariant fp16 linear vs cuBLAS fp16 and vLLM 0.22's batch-invariant "
        "linear at Llama-3-8B geometry, 32 layers",
        "date": datetime.date.today().isoformat(),
        "command": " ".join(["python3", *sys.argv]),
        "machine": machine(),
        "shapes": {name: [n, k] for name, n, k in bench.SHAPES},
        "tiles_fields": list(kernel.TILE_FIELDS),
        "timing": "per call: median over 20 replays of a CUDA graph of the 32 layers' calls (one weight copy each)",
        "m64_budget": args.m64_budget,
        "pdl": kernel.USE_PDL,
    }
    vllm_bi, vllm_reason = vllm_linear(args.vllm_batch_invariant)
    if args.tiles:
        chosen = json.loads(args.tiles.read_text())["tiles"]
    else:
        chosen = {
            name: list(t) if t else None for name, t in sweep(kernel, vllm_bi, args, result).items()
        }
    result["tiles"] = chosen
    for name, n, k in bench.SHAPES:
        kernel.TILES[(n, k)] = tuple(chosen[name] or kernel.DEFAULT_TILES)
    measure(kernel, vllm_bi, vllm_reason, result, Path(args.out))
    result["seconds"] = time.time() - t0
    Path(args.out).write_text(json.dumps(result, indent=1))
    for m, row in result["kernel"].items():
        print(f"M={m}: invariant {row['fp16_invariant_ms']} ms/step, cuBLAS {row['fp16_cublas_ms']}, "
              f"vLLM invariant {row['fp16_vllm_invariant_ms']}", flush=True)  # fmt: skip
    ok = all(result["invariance_checks"].values())
    print("TILES", json.dumps(chosen), "invariance checks all passed:", ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
