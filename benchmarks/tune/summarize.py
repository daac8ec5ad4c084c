"""Compare the picks of several tune reports of one recipe, grouped by report directory (STEP@RUN -> STEP): the
same config, or configs whose paired intervals overlap at the top load (said so), or a disagreement outside
the intervals (exit 1).

    python benchmarks/tune/summarize.py DIR1/tune-report.json DIR2/tune-report.json ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _interval(report: dict) -> tuple[float, float, float] | None:
    row = report.get("comparison", {}).get(report["top_load"], {})
    if row.get("low") is None:
        return None
    return row["ratio"], row["low"], row["high"]


def summarize(reports: list[dict]) -> tuple[list[str], bool]:
    """(lines to print, whether the runs agree: one config, or overlapping intervals)."""
    lines, picks = [], []
    for report in reports:
        winner = (report.get("winner") or {}).get("label", "none")
        interval = _interval(report)
        said = (
            f"{interval[0]}× [{interval[1]}–{interval[2]}]"
            if interval
            else report.get("verdict", "")
        )
        low = report.get("comparison", {}).get(report["loads"][0], {})
        low_said = f"{low['ratio']}× [{low.get('low')}–{low.get('high')}]" if low else ""
        lines.append(
            f"{report['_path']}: {winner}: {report['top_load']} {said}; {report['loads'][0]} {low_said}"
        )
        picks.append((winner, interval))
    labels = {winner for winner, _ in picks}
    if len(labels) == 1:
        lines.append(f"same pick in all {len(picks)} runs: {labels.pop()}")
        return lines, True
    intervals = [interval for _, interval in picks]
    if all(intervals) and max(i[1] for i in intervals) <= min(i[2] for i in intervals):
        lines.append(
            f"different picks {sorted(labels)}, but their top-load intervals overlap: the choice between "
            "them is within noise"
        )
        return lines, True
    lines.append(f"DIFFERENT picks {sorted(labels)} with intervals that do not all overlap")
    return lines, False


def main(paths: list[str]) -> int:
    reports = []
    for path in paths:
        report = json.loads(Path(path).read_text())
        report["_path"] = str(Path(path).parent.name)
        reports.append(report)
    if not reports:
        print("no reports given", file=sys.stderr)
        return 2
    groups: dict[str, list[dict]] = {}
    for report in reports:  # repeats of one step: quick-fixed@1, quick-fixed@2, ... -> quick-fixed
        groups.setdefault(report["_path"].split("@")[0], []).append(report)
    agree = True
    for name, group in groups.items():
        lines, same = summarize(group)
        print(f"== {name}\n" + "\n".join(lines))
        agree = agree and same
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
