"""Plot the paired decisions of one or more tune reports: for every finalist of every report, its throughput ratio
to Triton's default at each load with the bootstrap interval the rules were decided on (the chosen config
filled, the others hollow), the rule's threshold and any target line.

    python benchmarks/tune/plot_runs.py --out PLOT.png [--title T] [--target c64=3] REPORT.json ...

A report is named by its folder (quick-fixed@1, ...). Reads only the reports (schema 2): what is plotted is what
tune decided on, nothing recomputed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def finalists(report: dict) -> list[dict]:
    """Candidates measured in paired rounds: label, chosen?, {load: (ratio, low, high, outcome)}."""
    chosen = (report.get("winner") or {}).get("label")
    out = []
    for candidate in report.get("candidates", []):
        if not candidate.get("decisions"):
            continue
        loads = {
            d["load"]: (
                d["interval"]["ratio"],
                d["interval"]["low"],
                d["interval"]["high"],
                d["outcome"],
            )
            for d in candidate["decisions"]
        }
        out.append(
            {"label": candidate["label"], "chosen": candidate["label"] == chosen, "loads": loads}
        )
    return out


def plot(reports: list[tuple[str, dict]], out: Path, title: str, targets: dict[str, float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loads = reports[0][1]["loads"]
    labels = sorted({f["label"] for _name, report in reports for f in finalists(report)})
    colours = {label: plt.get_cmap("tab10")(i % 10) for i, label in enumerate(labels)}
    fig, axes = plt.subplots(1, len(loads), figsize=(5.5 * len(loads), 4.6), squeeze=False)
    for ax, load in zip(axes[0], loads, strict=True):
        for x, (_name, report) in enumerate(reports):
            rows = finalists(report)
            for k, row in enumerate(rows):
                if load not in row["loads"]:
                    continue
                ratio, low, high, _outcome = row["loads"][load]
                dx = x + (k - (len(rows) - 1) / 2) * 0.15
                colour = colours[row["label"]]
                ax.errorbar(
                    [dx],
                    [ratio],
                    yerr=[[ratio - low], [high - ratio]],
                    fmt="o",
                    color=colour,
                    markerfacecolor=colour if row["chosen"] else "white",
                    capsize=3,
                    markersize=7,
                )
            if report.get("default_is_best") or not report.get("winner"):
                said = "default kept" if report.get("default_is_best") else "no pick"
                ax.annotate(
                    said,
                    (x, 1.0),
                    textcoords="offset points",
                    xytext=(0, -14),
                    ha="center",
                    fontsize=8,
                )
        ax.axhline(
            reports[0][1].get("min_vs_default", 1.0),
            color="grey",
            linestyle="--",
            linewidth=1,
            label=f"rule: >= {reports[0][1].get('min_vs_default', 1.0):g}× the default",
        )
        if load in targets:
            ax.axhline(
                targets[load],
                color="red",
                linestyle=":",
                linewidth=1,
                label=f"target {targets[load]:g}×",
            )
        ax.set_xticks(range(len(reports)), [name for name, _ in reports], rotation=15, fontsize=8)
        ax.set_xlim(-0.5, len(reports) - 0.5)
        ax.set_title(f"{load}: paired ratio to Triton's default", fontsize=10)
        ax.set_ylabel("throughput / default (interval: bootstrap)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    handles = [
        plt.Line2D([], [], marker="o", linestyle="", color=colours[label], label=label)
        for label in labels
    ]
    fig.legend(
        handles=handles,
        loc="lower center",
        ncol=min(3, max(1, len(labels))),
        fontsize=8,
        title="finalists (filled: chosen)",
        title_fontsize=8,
    )
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.08 + 0.04 * ((len(labels) - 1) // 3), 1, 0.95))
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--title", default="tune: finalists against Triton's default")
    parser.add_argument(
        "--target", action="append", default=[], help="LOAD=RATIO, a line drawn at that load"
    )
    args = parser.parse_args(argv)
    reports = [(path.parent.name, json.loads(path.read_text())) for path in args.reports]
    try:
        targets = {load: float(value) for load, value in (t.split("=", 1) for t in args.target)}
    except ValueError:
        print(f"--target: expected LOAD=RATIO, got {args.target}", file=sys.stderr)
        return 2
    if not any(finalists(report) for _name, report in reports):
        print("no report has paired decisions to plot", file=sys.stderr)
        return 1
    plot(reports, args.out, args.title, targets)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
