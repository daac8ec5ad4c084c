"""Screen W4A16 kernel variants against the committed kernel in one device call (issue 45): each variant setting
(environment variables the variant file reads) timed by `w4a16_record.py --timing-only` with the committed plugin
as --previous in the same process, rounds interleaved; per setting the variant's time over the committed one's at
M = 1 and 64 rows (median and range over the rounds); then the full record (invariance checks included) of the
best setting at one row.

    python3 benchmarks/vllm/w4a16_screen.py --variant VARIANT.py --setting W4A16_PDL=-1 --setting W4A16_PDL=0 \
        --setting "W4A16_PDL=2 W4A16_PDL_TRIGGER=1" --rounds 2 --out $OUT/screen.json
    python3 benchmarks/vllm/w4a16_screen.py --from DIR --out screen.json   # summarize screen-*.json already made

A setting's screen files are DIR/screen-r<round>-<n>.json (n: the setting's index), each with its setting in
"screen_setting".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def ratios(records: list[dict], m: str) -> dict:
    """The variant's time over the committed kernel's (--previous) at M = m, per record, and their median/range."""
    values = [
        r["kernel"][m]["int4_invariant_ms"] / r["kernel"][m]["int4_invariant_previous_ms"]
        for r in records
    ]
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "rounds": values,
    }


def summarize(records: list[dict]) -> dict:
    """Screen records (each holding its "screen_setting") → per setting the ratios at 1 and 64 rows and the
    variant's own ms per step, the best setting (lowest median at one row) first."""
    by_setting: dict[str, list] = {}
    for record in records:
        by_setting.setdefault(record["screen_setting"], []).append(record)
    settings = []
    for setting, group in by_setting.items():
        settings.append({
            "setting": setting,
            "variant_over_committed_M1": ratios(group, "1"),
            "variant_over_committed_M64": ratios(group, "64"),
            "variant_ms_M1": [r["kernel"]["1"]["int4_invariant_ms"] for r in group],
            "committed_ms_M1": [r["kernel"]["1"]["int4_invariant_previous_ms"] for r in group],
            "meets_64_row_target": meets_64_row_target(group),
        })  # fmt: skip
    settings.sort(key=lambda s: s["variant_over_committed_M1"]["median"])
    gpus = sorted({r["machine"]["gpu"] for r in records})
    eligible = [s for s in settings if s["meets_64_row_target"] is not False] or settings
    return {
        "gpu": gpus,
        "settings": settings,
        "best": eligible[0]["setting"] if eligible else None,
        "best_rule": "the lowest median at one row among the settings no slower than cuBLAS fp16 at 64"
        " rows (issue 45), all settings when none is",
    }


def meets_64_row_target(group: list[dict]) -> bool | None:
    """Issue 45's 64-row target for a setting's records: the median of its per-step time at 64 rows no
    more than cuBLAS fp16's on the dense weights (timed in the same runs); None where not timed."""
    rows = [r["kernel"]["64"] for r in group]
    if any(row.get("fp16_cublas_ms") is None for row in rows):
        return None
    return statistics.median(r["int4_invariant_ms"] for r in rows) <= statistics.median(
        r["fp16_cublas_ms"] for r in rows
    )


def run_setting(variant: Path, setting: str, out: Path, timing_only: bool) -> dict:
    env = dict(os.environ, **dict(pair.split("=", 1) for pair in setting.split()))
    cmd = [
        sys.executable,
        str(HERE / "w4a16_record.py"),
        "--plugin",
        str(variant),
        "--out",
        str(out),
    ]
    cmd += ["--previous", str(HERE.parents[1] / "builder/backends/vllm/invariant/w4a16.py")]
    cmd += ["--timing-only"] if timing_only else []
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    record = json.loads(out.read_text())
    record["screen_setting"] = setting
    out.write_text(json.dumps(record, indent=1))
    return record


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", type=Path, help="the variant plugin file")
    ap.add_argument(
        "--setting", action="append", default=[], help="'VAR=VALUE ...' the variant reads"
    )
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--from", dest="from_dir", type=Path, help="summarize the screen files in this folder"
    )
    ap.add_argument(
        "--best-record", type=Path, help="with --from: the best setting's full record, made already"
    )
    ap.add_argument("--work", type=Path, default=Path("/tmp/w4a16-screen"))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    t0 = time.time()
    work = args.from_dir or args.work
    work.mkdir(parents=True, exist_ok=True)
    records = (
        [json.loads(p.read_text()) for p in sorted(work.glob("screen-r*.json"))]
        if args.from_dir
        else []
    )
    for round_ in range(1, (0 if args.from_dir else args.rounds) + 1):
        for n, setting in enumerate(args.setting):
            records.append(
                run_setting(args.variant, setting, work / f"screen-r{round_}-{n}.json", True)
            )
    result = {
        "what": "issue 45: W4A16 kernel variants screened against the committed kernel, same process"
    }
    result.update(summarize(records))
    if (args.variant or args.best_record) and result["best"] is not None:
        if args.best_record:
            full = json.loads(args.best_record.read_text())
        else:
            full = run_setting(args.variant, result["best"], work / "record-best.json", False)
        result["best_record"] = full
        result["best_invariance_checks_passed"] = all(full["invariance_checks"].values())
    result["seconds"] = time.time() - t0
    args.out.write_text(json.dumps(result, indent=1))
    for s in result["settings"]:
        print(
            s["setting"],
            "variant/committed at 1 row:",
            s["variant_over_committed_M1"]["rounds"],
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
