"""The tune plot: throughput vs p99 per candidate at each load, the SLA line, default and tuned
marked."""

from __future__ import annotations

from pathlib import Path


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # registers the formatters used below

    loads = report["loads"]
    fig, axes = plt.subplots(1, len(loads), figsize=(5.5 * len(loads), 4.6), squeeze=False)
    winner = (report.get("winner") or {}).get("label")
    for ax, load in zip(axes[0], loads, strict=True):
        for candidate in report["candidates"]:
            _plot_candidate(ax, candidate, load, winner)
        _plot_default_again(ax, report, load)
        _finish_axes(ax, report, load, matplotlib.ticker)
    fig.suptitle(
        f"tritonbuild tune ({report['search']}): blue = candidates, red = rejected at some load, "
        "x = answers differ from the goldens",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_candidate(ax, candidate: dict, load: str, winner: str | None) -> None:
    """One candidate at one load: the default a grey square, the winner a green star, the others a
    dot (blue, red when rejected; a cross when its answers differed)."""
    pt = candidate["loads"].get(load)
    if not pt or pt["p99_ms"] is None:
        return
    label = candidate["label"]
    if label == "default":
        ax.scatter(
            pt["p99_ms"],
            pt["throughput"],
            s=90,
            marker="s",
            color="tab:gray",
            zorder=3,
            label="Triton default",
        )
    elif label == winner:
        ax.scatter(
            pt["p99_ms"],
            pt["throughput"],
            s=160,
            marker="*",
            color="tab:green",
            zorder=4,
            label=f"tuned: {label}",
        )
    else:
        # a quick search measures most candidates at the top load only (feasible is then None):
        # one whose answers differed there, or that already failed there, is rejected all the same
        differs = any(point.get("mismatches") for point in candidate["loads"].values())
        bad = candidate.get("feasible") is False or differs or bool(pt.get("errors"))
        ax.scatter(
            pt["p99_ms"],
            pt["throughput"],
            s=28 if differs else 22,
            marker="x" if differs else "o",
            color="tab:red" if bad else "tab:blue",
            alpha=0.7,
            zorder=2,
        )


def _plot_default_again(ax, report: dict, load: str) -> None:
    """Triton's default measured again after the search: a hollow grey square."""
    for measurement in report.get("measurements", []):
        if (
            measurement["candidate"].startswith("default (again")
            and measurement["load"] == load
            and measurement.get("p99_ms")
        ):
            ax.scatter(
                measurement["p99_ms"],
                measurement["throughput"],
                s=90,
                marker="s",
                facecolors="none",
                edgecolors="tab:gray",
                zorder=3,
                label="default, measured again",
            )


def _finish_axes(ax, report: dict, load: str, ticker) -> None:
    """The SLA line, the load generator's ceiling at the top load, log latency axis, labels."""
    if report.get("sla_p99_ms"):
        ax.axvline(
            report["sla_p99_ms"],
            color="tab:orange",
            linestyle="--",
            label=f"SLA p99 {report['sla_p99_ms']} ms",
        )
    ceiling = report.get("ceiling", {}).get("throughput")
    if ceiling and load == report["top_load"]:
        ax.axhline(
            ceiling, color="black", linestyle=":", linewidth=1, label="load generator ceiling"
        )
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.set_xlabel("p99 latency (ms, log)")
    ax.set_ylabel("throughput (req/s)")
    ax.set_title(f"{report['model']} @ {load}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
