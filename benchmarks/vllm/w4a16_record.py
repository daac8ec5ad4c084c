"""The kernel record of issue 45 for the batch-invariant W4A16 linear (builder/backends/vllm/invariant/w4a16.py),
at Llama-3-8B geometry on the GPU it runs on: per row count M, the 32 layers' linears per decode step (each of the
32 layers its own copy of the weights, the 32 calls of a shape captured in one CUDA graph) with the invariant INT4
kernel at the chosen tiles, with an earlier plugin (--previous), and with cuBLAS fp16 on the dense weights; the
fraction of the bandwidth bound (the INT4 weights and scales read once at the GPU's peak bandwidth); and the
invariance checks at the chosen tiles in the same run (w4a16_bench.check_layer).

    python3 benchmarks/vllm/w4a16_record.py [--tiles SWEEP.json] [--previous OLD_PLUGIN.py] [--plugin OTHER.py]
        [--out docs/runs/DATE-w4a16-kernel-GPU.json]

--tiles: a w4a16_bench.py sweep's output (its "tiles"); without it the plugin's TILES rows. --previous: an earlier
plugin file, timed in the same run at its own TILES and weight layout (int4_invariant_previous_ms). --plugin:
another plugin file recorded in place of builder/'s (a variant under test).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
import types
from pathlib import Path

import torch

try:
    from benchmarks.vllm import w4a16_bench as bench
    from benchmarks.vllm import w4a16_default
except ImportError:  # run as a script: its own folder is on the path
    import w4a16_bench as bench
    import w4a16_default

M_VALUES = [1, 8, 16, 32, 64, 128, 256]
# Peak memory bandwidth (bytes/s) by device name, from NVIDIA's datasheets (H100 SXM5 80GB HBM3 3.35 TB/s, H100
# PCIe 2.0 TB/s, H100 NVL 3.9 TB/s, H200 4.8 TB/s); the first name contained in the device's name applies
PEAK_BANDWIDTH = [("H100 PCIe", 2.0e12), ("H100 NVL", 3.9e12), ("H200", 4.8e12), ("H100", 3.35e12)]


def peak_bandwidth(gpu_name: str) -> float | None:
    return next((bw for name, bw in PEAK_BANDWIDTH if name in gpu_name), None)


def int4_bytes(n: int, k: int, group: int) -> int:
    """A layer's INT4 weights (K/2 bytes per output column) and fp16 scales (K/G per column)."""
    return n * k // 2 + n * (k // group) * 2


def bandwidth_fraction(nbytes: float, peak: float, ms: float) -> float:
    """The bound (nbytes at peak bytes/s) over the measured time."""
    return nbytes / peak * 1e3 / ms


def copy_bandwidth() -> float:
    """Bytes/s of a 1 GiB device-to-device copy (read + write), the median of 10."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    times = []
    for _ in range(11):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return 2 * src.numel() / (sorted(times[1:])[5] / 1e3)


def shape_times(kernels: dict, n: int, k: int, default=None) -> dict:
    """ms per call at each M of the shape: each named (plugin, tiles row) with its own weight layout, cuBLAS
    fp16 on the dense weights and, when given, vLLM's default W4A16 kernel (w4a16_default.Machete) on its own
    layout; 32 copies of the weights (one per layer)."""
    packed, scale, dense = bench.random_layer(n, k)
    dense_copies = [dense.clone() for _ in range(bench.LAYERS)]
    default_copies = (
        [default.prepare(packed, scale) for _ in range(bench.LAYERS)] if default else []
    )
    prepared = {}
    for name, (plugin, row) in kernels.items():
        plugin.TILES[(n, k)] = row
        w, s = plugin.prepare_weights(packed, scale, bench.GROUP)
        prepared[name] = (plugin, row, [(w.clone(), s.clone()) for _ in range(bench.LAYERS)])
    out = {}
    for m in M_VALUES:
        x = torch.randn((m, k), device="cuda", dtype=torch.float16)
        row = {"fp16_cublas": bench.timed(lambda i, x=x: x @ dense_copies[i].T)}
        if default:
            row["int4_default"] = bench.attempt(
                lambda x=x: bench.timed(
                    lambda i: default.matmul(x, *default_copies[i], bench.GROUP)
                )
            )
        for name, (plugin, tiles_row, copies) in prepared.items():
            plugin.TILES[(n, k)] = tiles_row
            row[name] = bench.attempt(
                lambda x=x, c=copies, p=plugin: bench.timed(
                    lambda i: p.w4a16_matmul(x, *c[i], bench.GROUP)
                )
            )
        out[m] = row
    return out


def summarize(per_shape: dict, gpu: str, copy_bw: float, default_reason: str | None = None) -> dict:
    """Per M: the 32 layers' linears per step (ms) for each kernel, and the invariant kernel's bandwidth fraction;
    default_reason: why vLLM's default kernel has no column (None when it was timed)."""
    nbytes = sum(int4_bytes(n, k, bench.GROUP) for _, n, k in bench.SHAPES) * bench.LAYERS
    peak = peak_bandwidth(gpu)
    kernel = {}
    for m in M_VALUES:

        def step(name, m=m):
            values = [per_shape[s][m].get(name) for s, _, _ in bench.SHAPES]
            return sum(values) * bench.LAYERS if all(isinstance(v, float) for v in values) else None

        ms, cublas, old, default = (
            step("int4_invariant"),
            step("fp16_cublas"),
            step("int4_invariant_previous"),
            step("int4_default"),
        )
        kernel[m] = {
            "int4_invariant_ms": ms,
            "fp16_cublas_ms": cublas,
            "int4_default_ms": default,
            "int4_default_skipped": default_reason
            if default_reason or default
            else "vLLM's default kernel could not run at every shape (per_layer_us says why)",
            "bandwidth_fraction": bandwidth_fraction(nbytes, peak, ms) if peak and ms else None,
            "bandwidth_fraction_of_measured_copy": bandwidth_fraction(nbytes, copy_bw, ms)
            if ms
            else None,
            "vs_fp16_cublas": cublas / ms if ms else None,
            "int4_invariant_previous_ms": old,
            "per_layer_us": {
                s: {k: (v * 1e3 if isinstance(v, float) else v) for k, v in per_shape[s][m].items()}
                for s, _, _ in bench.SHAPES
            },
        }
    return {
        "kernel": kernel,
        "bandwidth": {
            "int4_bytes_per_step": nbytes,
            "peak_bytes_per_s": peak,
            "peak_source": "NVIDIA datasheet figure for the device name (w4a16_record.PEAK_BANDWIDTH)",
            "bound_ms": nbytes / peak * 1e3 if peak else None,
            "measured_copy_bytes_per_s": copy_bw,
        },
    }


def default_error(default, n: int, k: int) -> float:
    """vLLM's default kernel against the dense fp16 weights its INT4 words stand for (M = 7): the largest error
    relative to the largest answer, so a wrong packing (a few % at least) cannot pass unseen as a fast kernel."""
    packed, scale, dense = bench.random_layer(n, k, seed=4)
    x = torch.randn((7, k), device="cuda", dtype=torch.float16)
    want = x.float() @ dense.float().T
    got = default.matmul(x, *default.prepare(packed, scale), bench.GROUP).float()
    return float((got - want).abs().max() / want.abs().max())


def ptx_vs_triton_ops(plugin, n: int, k: int) -> int:
    """Elements where the plugin's fp16 dequantization in PTX (the GPU's) and in Triton operations (the path Triton's
    interpreter runs in CI) give other answers at its tiles, M = 1, 7, 64: the same kernel otherwise, so 0."""
    ops = bench.load_plugin(name="plugin_triton_ops")
    ops.os = types.SimpleNamespace(
        environ={"TRITON_INTERPRET": "1"}
    )  # the plugin's own switch, not Triton's
    ops.TILES.update(plugin.TILES)
    packed, scale, _ = bench.random_layer(n, k, seed=3)
    w, s = plugin.prepare_weights(packed, scale, bench.GROUP)
    x = torch.randn((64, k), device="cuda", dtype=torch.float16)
    return sum(
        int(
            (
                plugin.w4a16_matmul(x[:m], w, s, bench.GROUP)
                != ops.w4a16_matmul(x[:m], w, s, bench.GROUP)
            ).sum()
        )
        for m in (1, 7, 64)
    )


def ptx_only(plugin, out: Path) -> int:
    """--ptx-check: ptx_vs_triton_ops at each shape, written to out; exit 0 when every count is 0."""
    counts = {name: ptx_vs_triton_ops(plugin, n, k) for name, n, k in bench.SHAPES}
    tiles = {f"{n}x{k}": plugin.TILES[(n, k)] for _, n, k in bench.SHAPES}
    result = {"gpu": torch.cuda.get_device_name(), "tiles": tiles, "differing_elements": counts}
    out.write_text(json.dumps(result, indent=1))
    print("PTX vs Triton operations, differing elements:", counts)
    return 0 if not any(counts.values()) else 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiles", type=Path, help="a w4a16_bench.py sweep's JSON: its chosen tiles")
    ap.add_argument("--out", default="w4a16-record.json")
    ap.add_argument(
        "--previous", type=Path, help="an earlier plugin file: timed alongside, own tiles"
    )
    ap.add_argument("--plugin", type=Path, help="the plugin file to record (default: ours)")
    ap.add_argument(
        "--ptx-check", action="store_true", help="only compare the PTX and Triton dequantizations"
    )
    ap.add_argument(
        "--timing-only",
        action="store_true",
        help="screening variants: no invariance checks (the record says so; never the issue's record)",
    )
    args = ap.parse_args()
    t0 = time.time()
    plugin = bench.load_plugin(args.plugin) if args.plugin else bench.load_plugin()
    previous = bench.load_plugin(args.previous, "previous_plugin") if args.previous else None
    if args.ptx_check:
        return ptx_only(plugin, Path(args.out))
    if args.tiles:
        chosen = json.loads(args.tiles.read_text())["tiles"]
        plugin.TILES.update(
            {tuple(map(int, key.split("x"))): tuple(row) for key, row in chosen.items()}
        )
    chosen = {(n, k): tuple(plugin.TILES[(n, k)]) for _, n, k in bench.SHAPES}
    gpu = torch.cuda.get_device_name()
    props = torch.cuda.get_device_properties(0)
    record = {
        "what": "issue 45 kernel record: the batch-invariant W4A16 linear at Llama-3-8B geometry, 32 layers",
        "date": datetime.date.today().isoformat(),
        "command": " ".join(["python3", *sys.argv]),
        "machine": {
            "gpu": gpu,
            "sms": props.multi_processor_count,
            "capability": list(torch.cuda.get_device_capability()),
            "torch": torch.__version__,
            "triton": __import__("triton").__version__,
            "cuda": torch.version.cuda,
        },
        "shapes": {name: [n, k] for name, n, k in bench.SHAPES},
        "group": bench.GROUP,
        "tiles": {f"{n}x{k}": row for (n, k), row in chosen.items()},
        "tiles_fields": list(plugin.TILE_FIELDS),
        "plugin": str(args.plugin) if args.plugin else None,
        "previous": str(args.previous) if args.previous else None,
        "timing": "per call: median over 20 replays of a CUDA graph of the 32 layers' calls (one weight copy each)",
    }
    per_shape, checks, errors = {}, {}, {}
    default, default_reason = w4a16_default.load()
    record["int4_default_kernel"] = "vLLM's Machete (w4a16_default.py)" if default else None
    for name, n, k in bench.SHAPES:
        kernels = {"int4_invariant": (plugin, chosen[(n, k)])}
        if previous:
            kernels["int4_invariant_previous"] = (previous, tuple(previous.TILES[(n, k)]))
        per_shape[name] = shape_times(kernels, n, k, default)
        if default:
            errors[name] = default_error(default, n, k)
        plugin.TILES[(n, k)] = chosen[(n, k)]
        if not args.timing_only:
            checks[name] = bench.check_layer(plugin, *bench.random_layer(n, k, seed=2), k)
        print(name, json.dumps(per_shape[name][1]), json.dumps(checks.get(name)), flush=True)
        torch.cuda.empty_cache()
    record.update(summarize(per_shape, gpu, copy_bandwidth(), default_reason))
    if default:
        record["int4_default_max_rel_err_vs_dequant"] = errors
    record["invariance_checks"] = {}
    if args.timing_only:
        record["invariance_checks_skipped"] = "--timing-only: a screening run, not a record"
    graphs = "_".join(map(str, bench.GRAPH_M))
    for name, c in checks.items():
        record["invariance_checks"].update({
            f"{name}_rows_vs_alone_M1_2048": not any(c["rows_differing_from_alone"].values()),
            f"{name}_cuda_graphs_M{graphs}": not any(c["graph_rows_differing"].values()),
            f"{name}_within_1pct_of_dequant_fp32": c["max_rel_err_vs_dequant_fp32"] < 1e-2,
            f"{name}_bf16_rows_vs_alone": not any(c["bf16_rows_differing_from_alone"].values()),
            f"{name}_bf16_within_1pct": c["bf16_max_rel_err_vs_dequant_fp32"] < 1e-2,
        })  # fmt: skip
    record["invariance_detail"] = checks
    record["seconds"] = time.time() - t0
    Path(args.out).write_text(json.dumps(record, indent=1))
    for m, row in record["kernel"].items():
        print(f"M={m}: int4 invariant {row['int4_invariant_ms']} ms/step, previous "
              f"{row['int4_invariant_previous_ms']}, cuBLAS fp16 {row['fp16_cublas_ms']}, "
              f"bandwidth fraction {row['bandwidth_fraction']}", flush=True)  # fmt: skip
    if args.timing_only:
        print("timing only: no invariance check ran")
        return 0
    ok = all(record["invariance_checks"].values())
    print("invariance checks all passed:", ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
