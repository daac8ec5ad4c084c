"""Where a W4A16 call's time goes inside the GPU (issue 45): the kernel's one-row time is about 4 µs per call more
than its bytes at the streaming rate (variants/README.md), and timing whole graphs cannot say where those 4 µs are.
The timeline variant (variants/timeline.patch, the committed kernel's arithmetic) has every program write
%globaltimer when it is scheduled, after the PDL wait, after its K loop and after its finish, and its SM. Per
layer shape, 32 calls (one weight copy each) captured in one CUDA graph as w4a16_record.py times them, replayed;
per call: its span (first program scheduled to last finished), the PDL wait, the K loop, the finish (all programs',
and the split-K tile's last), how far apart the programs start, the gap to the next call (negative: the next one's
programs were scheduled before this one ended, PDL) and programs per SM; medians over the calls and replays, and the
graph's time per call with and without the timeline (what writing it costs) and the smallest step seen between two
timestamps (an upper bound on %globaltimer's resolution there: the figures are no finer than it).

    cp builder/backends/vllm/invariant/w4a16.py variant.py && patch variant.py benchmarks/vllm/variants/timeline.patch
    python3 benchmarks/vllm/w4a16_timeline.py --variant variant.py [--rows 1,64] --out $OUT/timeline.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path

try:
    from benchmarks.vllm import w4a16_bench as bench
except ImportError:  # run as a script: its own folder is on the path
    import w4a16_bench as bench


def per_call(values: list[int], programs: int, tiles_split: int) -> dict:
    """One call's programs (5 int64 each: scheduled, started, loop done, ended, SM) as durations in µs.
    tiles_split: the K split (the programs of one output tile are consecutive in the linear id, the split
    last)."""
    rows = [values[5 * i : 5 * i + 5] for i in range(programs)]
    sched, start, loop, end = ([r[j] for r in rows] for j in range(4))
    first = min(sched)
    tile_last = [
        max(rows[i : i + tiles_split], key=lambda r: r[3]) for i in range(0, programs, tiles_split)
    ]
    stamps = sorted({t for t in (*sched, *start, *loop, *end)})
    ticks = [b - a for a, b in itertools.pairwise(stamps)]
    sms = {}
    for r in rows:
        sms[r[4]] = sms.get(r[4], 0) + 1
    return {
        "first_sched": first,
        "last_end": max(end),
        "span_us": (max(end) - first) / 1e3,
        "wait_us": statistics.median(b - a for a, b in zip(sched, start, strict=True)) / 1e3,
        "loop_us": statistics.median(b - a for a, b in zip(start, loop, strict=True)) / 1e3,
        "loop_max_us": max(b - a for a, b in zip(start, loop, strict=True)) / 1e3,
        "finish_us": statistics.median(b - a for a, b in zip(loop, end, strict=True)) / 1e3,
        "finish_tile_last_us": statistics.median(r[3] - r[2] for r in tile_last) / 1e3,
        "start_spread_us": (max(start) - min(start)) / 1e3,
        "sched_spread_us": (max(sched) - first) / 1e3,
        "programs": programs,
        "tick_ns": min(ticks) if ticks else None,  # the timer's resolution, at most
        "sms_used": len(sms),
        "max_programs_per_sm": max(sms.values()),
    }


def summarize(replays: list[list[dict]]) -> dict:
    """Medians over the calls of every replay of a graph: each per_call figure, and the gap from a call's last
    program's end to the next call's first program's scheduling, within a replay (negative: overlapped by PDL)."""
    calls = [c for replay in replays for c in replay]
    gaps = [
        (b["first_sched"] - a["last_end"]) / 1e3
        for replay in replays
        for a, b in itertools.pairwise(replay)
    ]
    keys = [k for k in calls[0] if k.endswith("_us") or k in ("sms_used", "max_programs_per_sm")]
    out = {k: statistics.median(c[k] for c in calls) for k in keys}
    out["gap_to_next_us"] = statistics.median(gaps) if gaps else None
    out["programs"] = calls[0]["programs"]
    out["timer_tick_ns"] = min((c["tick_ns"] for c in calls if c.get("tick_ns")), default=None)
    out["replays"] = len(replays)
    return out


def run_shape(plugin, plain, n: int, k: int, m: int, replays: int) -> dict:
    import torch

    packed, scale, _ = bench.random_layer(n, k)
    split = plugin.tiles_for(n, k, bench.GROUP)[5]
    copies = [plugin.prepare_weights(packed, scale, bench.GROUP) for _ in range(bench.LAYERS)]
    x = torch.randn((m, k), device="cuda", dtype=torch.float16)
    plain_ms = bench.timed(lambda i: plain.w4a16_matmul(x, *copies[i], bench.GROUP))
    times = plugin.TIMES
    times.update(buf=torch.zeros(1 << 22, dtype=torch.int64, device="cuda"), next=0, calls=[])
    timeline_ms = bench.timed(lambda i: plugin.w4a16_matmul(x, *copies[i], bench.GROUP))
    times.update(next=0, calls=[])
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(bench.LAYERS):
            plugin.w4a16_matmul(x, *copies[i], bench.GROUP)
    captured, seen = times["calls"], []
    for _ in range(replays):
        graph.replay()
        torch.cuda.synchronize()
        buf = times["buf"].cpu().tolist()
        seen.append([per_call(buf[at : at + 5 * p], p, split) for at, p, _, _ in captured])
    times.update(buf=None, next=0, calls=[])
    return {
        "tiles": list(plugin.tiles_for(n, k, bench.GROUP)),
        "graph_ms_per_call": {"plain": plain_ms, "timeline": timeline_ms},
        **summarize(seen),
    }


def main() -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--variant", type=Path, required=True, help="w4a16.py with timeline.patch applied"
    )
    ap.add_argument("--rows", default="1,64")
    ap.add_argument("--replays", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    plugin = bench.load_plugin(args.variant, "timeline_plugin")
    plain = bench.load_plugin(bench.PLUGIN, "plain_plugin")
    result = {"gpu": torch.cuda.get_device_name(), "what": __doc__.split("\n\n")[0], "shapes": {}}
    for name, n, k in bench.SHAPES:
        for m in map(int, args.rows.split(",")):
            entry = run_shape(plugin, plain, n, k, m, args.replays)
            result["shapes"][f"{name} M={m}"] = entry
            print(name, m, json.dumps(entry), flush=True)
            args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
