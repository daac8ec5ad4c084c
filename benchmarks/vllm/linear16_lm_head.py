"""The batch-invariant fp16/bf16 linear (builder/backends/vllm/invariant/linear16.py) at Llama-3-8B's lm_head, on a GPU,
before the plugin puts it there (issue 45 item 3). Under VLLM_BATCH_INVARIANT=1, vLLM 0.22 computes the logits with
its own batch-invariant matmul (vocab_parallel_embedding.py:73-74, matmul_kernel_persistent): on an H100 a decode
step's lm_head took 531 µs at 1 stream against cuBLAS's 352 in the default config, 424 against 375 at 64
(docs/runs/2026-12-07-decode-profile-h100.json, one profiled run each: single readings). One command: a tile sweep at
the vocabulary's shape (128,256 x 4,096; linear16_bench's candidates and rule: the fastest at 1 row whose 256 rows
are no slower than vLLM's linear and whose 64 rows stay within --m64-budget of cuBLAS fp16), then per row count M = 1
.. 256 the kernel at the chosen tiles, cuBLAS fp16 and vLLM's batch-invariant linear (ms per call, the weights read
from DRAM: two 1 GB copies alternate), the kernel's bandwidth fraction, and the invariance checks at that shape (rows
vs alone for M = 1 .. 2048, CUDA graphs, fp16 and bf16). The plugin takes the lm_head only if the kernel is no slower
than vLLM's at every M a decode step has (1 .. max_num_seqs): the kernel cannot change with M, so it must win at all
of them.

    python3 benchmarks/vllm/linear16_lm_head.py --vllm-batch-invariant bi.py --jobs 16 --out FILE.json
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from pathlib import Path

try:
    from benchmarks.vllm import linear16_bench as l16
    from benchmarks.vllm import w4a16_bench as bench
    from benchmarks.vllm import w4a16_record as record
    from benchmarks.vllm.linear16_choose import choose
except ImportError:  # run as a script: its own folder is on the path
    import linear16_bench as l16
    import w4a16_bench as bench
    import w4a16_record as record
    from linear16_choose import choose

LM_HEAD = (
    "lm_head",
    128256,
    4096,
)  # Llama-3-8B: vocab_size x hidden_size (benchmarks/vllm/tiny_llama.py's 8B config)


def summarize(times: dict, gpu: str) -> dict:
    """Per M: ms per call of each, the kernel's fraction of the bandwidth bound (the fp16 weights once) and its
    ratio to vLLM's and cuBLAS's times (> 1: the kernel is faster)."""
    _, n, k = LM_HEAD
    peak = record.peak_bandwidth(gpu)
    out = {}
    for m, row in times.items():
        ms, vllm_ms, cublas = (
            row.get(key) for key in ("fp16_invariant", "fp16_vllm_invariant", "fp16_cublas")
        )
        ok = isinstance(ms, float)
        out[m] = {
            "fp16_invariant_ms": ms,
            "fp16_vllm_invariant_ms": vllm_ms,
            "fp16_cublas_ms": cublas,
            "bandwidth_fraction": record.bandwidth_fraction(n * k * 2, peak, ms)
            if ok and peak
            else None,
            "vllm_over_kernel": vllm_ms / ms if ok and isinstance(vllm_ms, float) else None,
            "cublas_over_kernel": cublas / ms if ok else None,
        }
    return out


def no_slower_than_vllm(kernel_rows: dict) -> bool | None:
    """Whether the kernel is no slower than vLLM's batch-invariant linear at every M measured (None: not known)."""
    ratios = [row["vllm_over_kernel"] for row in kernel_rows.values()]
    return None if any(r is None for r in ratios) else all(r >= 1.0 for r in ratios)


def main() -> int:
    ap = l16.arguments("linear16-lm-head.json", 60)
    args = ap.parse_args()
    t0, kernel = time.time(), l16.load_kernel()
    name, n, k = LM_HEAD
    result = {
        "what": "issue 45 item 3: the batch-invariant fp16 linear at Llama-3-8B's lm_head vs vLLM 0.22's "
        "batch-invariant linear (which serves it under VLLM_BATCH_INVARIANT=1) and cuBLAS fp16",
        "date": datetime.date.today().isoformat(),
        "command": " ".join(["python3", *sys.argv]),
        "machine": l16.machine(),
        "shape": [n, k],
        "tiles_fields": list(kernel.TILE_FIELDS),
        "pdl": kernel.USE_PDL,
    }
    vllm_bi, skipped = l16.vllm_linear(args.vllm_batch_invariant)
    if skipped:
        result["vllm_skipped"] = skipped
    # the tiles the kernel takes at this shape today (not in TILES: the default), then the sweep's candidates
    candidates = [kernel.tiles_for(n, k), *l16.candidates_for(n, k)]
    if args.jobs > 1:
        l16.precompile(args.jobs, {(n, k): candidates})
    ms = l16.sweep_layer(kernel, vllm_bi, n, k, candidates, time.time() + args.budget)
    layers = {name: {"N": n, "K": k, "ms": ms, "candidates": candidates}}
    result["sweep"] = layers
    tiles = choose(layers, args.m64_budget).get(name)
    result["tiles"] = list(tiles) if tiles else None
    kernel.TILES[(n, k)] = tuple(tiles or kernel.DEFAULT_TILES)
    times = l16.shape_times(kernel, vllm_bi, n, k, layers=bench.copies_for(n * k * 2))
    result["kernel"] = summarize(times, result["machine"]["gpu"])
    result["no_slower_than_vllm_at_every_m"] = no_slower_than_vllm(result["kernel"])
    result["invariance_checks"] = l16.checks_passed(name, l16.check_layer(kernel, n, k))
    result["seconds"] = time.time() - t0
    Path(args.out).write_text(json.dumps(result, indent=1))
    for m, row in result["kernel"].items():
        print(f"M={m}: {json.dumps(row)}", flush=True)
    ok = all(result["invariance_checks"].values())
    print("tiles", result["tiles"], "no slower than vLLM's at every M:", result["no_slower_than_vllm_at_every_m"],
          "invariance checks all passed:", ok)  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
