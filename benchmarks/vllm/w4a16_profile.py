"""Where the batch-invariant W4A16 linear's time goes at one layer shape (issue 45, item 3's kernel part): Nsight
Compute on one call, after warm-up calls over copies of the weights that do not fit the L2 cache together (as in
a decode step, each call reads its weights from DRAM). Run under ncu:

    ncu --kernel-name regex:_w4a16 --launch-skip 8 --launch-count 1 --set full --import-source yes \
        -o OUT/qkv python3 benchmarks/vllm/w4a16_profile.py qkv_proj [--rows 1] [--tiles 16,64,256,4,3,4]
        [--plugin OLD.py]
    ncu -i OUT/qkv.ncu-rep --page source --csv --print-source sass > OUT/qkv-sass.csv   # stalls per instruction
    ncu -i OUT/qkv.ncu-rep --page details --csv > OUT/qkv-details.csv

Without ncu it prints the call's time (the median of 200 launches, each on the next weight copy).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

try:
    from benchmarks.vllm import w4a16_bench as bench
except ImportError:  # run as a script: its own folder is on the path
    import w4a16_bench as bench


def main() -> int:
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
