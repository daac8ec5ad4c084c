"""Where the batch-invariant W4A16 linear's time goes at one layer shape (issue 45, item 3's kernel part): Nsight
Compute on one call, after warm-up calls over copies of the weights that do not fit the L2 cache together (as in
a decode step, each call reads its weights from DRAM). Run under ncu:

    ncu --kernel-name regex:_w4a16 --launch-skip 8 --launch-count 1 --set full --import-source yes \
        -o OUT/qkv python3 benchmarks/vllm/w4a16_profile.py qkv_proj [--rows 1] [--tiles 16,64,256,4,3,4]
        [--plugin OLD.py]
    ncu -i OUT/qkv.ncu-rep --page source --csv --print-source sass > OUT/qkv-sass.csv   # stalls per instruction
    ncu -i OUT/qkv.ncu-rep --page details --csv > OUT/qkv-details.csv

Without ncu it prints the call's time (the median of 200 launches, each on the next weight copy).
`--summarize OUT/qkv-sass.csv [more.csv ...]` (no GPU needed) prints, per file, the warp-stall samples by reason
and the instructions holding the most samples, as JSON.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import torch

try:
    from benchmarks.vllm import w4a16_bench as bench
except ImportError:  # run as a script: its own folder is on the path
    import w4a16_bench as bench


def summarize(path: Path, top: int = 12) -> dict:
    """Nsight Compute's source page (--page source --csv --print-source sass): stall samples by reason
    over the kernel, and the `top` instructions by samples with their two main reasons."""
    rows = list(csv.reader(path.open()))
    header, data = rows[1], rows[2:]
    col = {name: i for i, name in enumerate(header)}

    def num(row, name) -> float:
        try:
            return float(row[col[name]].replace(",", ""))
        except ValueError:
            return 0.0

    samples = "Warp Stall Sampling (All Samples)"
    total = sum(num(r, samples) for r in data) or 1.0
    reasons = [n for n in header if n.startswith("stall_") and "Not Issued" not in n]
    by_reason = {n: sum(num(r, n) for r in data) / total for n in reasons}
    hot = sorted(data, key=lambda r: -num(r, samples))[:top]
    return {
        "samples": total,
        "by_reason": {
            n: round(v, 3) for n, v in sorted(by_reason.items(), key=lambda t: -t[1]) if v
        },
        "top_instructions": [
            {
                "offset": hex(int(r[col["Address"]], 16) - int(data[0][col["Address"]], 16)),
                "sass": r[col["Source"]].strip(),
                "share": round(num(r, samples) / total, 3),
                "reasons": [
                    n for _, n in sorted(((num(r, n), n) for n in reasons), reverse=True)[:2]
                ],
            }
            for r in hot
        ],
    }


def main() -> int:
    if sys.argv[1:2] == ["--summarize"]:
        print(json.dumps({p: summarize(Path(p)) for p in sys.argv[2:]}, indent=1))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", choices=[name for name, _, _ in bench.SHAPES])
    ap.add_argument("--rows", type=int, default=1)
    ap.add_argument(
        "--tiles", help="TILE_FIELDS as comma-separated integers (default: the plugin's)"
    )
    ap.add_argument("--plugin", type=Path, default=bench.PLUGIN, help="another plugin file")
    args = ap.parse_args()
    plugin = bench.load_plugin(args.plugin, "profiled_plugin")
    _, n, k = next(s for s in bench.SHAPES if s[0] == args.shape)
    if args.tiles:
        plugin.TILES[(n, k)] = tuple(int(v) for v in args.tiles.split(","))
    packed, scale, _ = bench.random_layer(n, k)
    w, s = plugin.prepare_weights(packed, scale, bench.GROUP)
    copies = bench.copies_for(w.numel() * 4 + s.numel() * 2)
    weights = [(w.clone(), s.clone()) for _ in range(copies)]
    x = torch.randn((args.rows, k), dtype=torch.float16, device="cuda")
    times = []
    for i in range(200):
        cw, cs = weights[i % copies]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        plugin.w4a16_matmul(x, cw, cs, bench.GROUP)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    times.sort()
    print(f"{args.shape} rows={args.rows} tiles={plugin.tiles_for(n, k, bench.GROUP)} "
          f"median {times[len(times) // 2]:.1f} us over {len(times)} launches (eager, events)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
