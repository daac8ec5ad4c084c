"""What a tune run writes into its report directory: each measurement as it is made
(tune-measurements.jsonl, kept by an interrupted run), then the report, the recipe patch and the
plot."""

from __future__ import annotations

import json
from pathlib import Path

from tritonbuild.core.fsutil import write_atomic
from tritonbuild.core.hashing import pretty_json
from tritonbuild.errors import TuneError
from tritonbuild.tune.loadgen import Result
from tritonbuild.tune.report import finite
from tritonbuild.tune.space import Candidate


def append_measurement(
    report_dir: Path, candidate: Candidate, phase: str, elapsed: float, result: Result
) -> None:
    """Every measurement as it is made: an interrupted run (Ctrl-C, a time limit) keeps what it
    measured."""
    entry = {
        "candidate": candidate.label,
        "phase": phase,
        "config": candidate.model_dump(exclude={"coords"}),
        "elapsed_s": round(elapsed, 1),
        **result.to_dict(),
    }
    with open(report_dir / "tune-measurements.jsonl", "a") as f:
        f.write(json.dumps(finite(entry)) + "\n")


def write_outputs(
    report: dict, winner: Candidate | None, report_dir: Path, model: str, loads: list[str]
) -> dict:
    """The report, the recipe patch and the plot; TuneError (after writing them) when nothing
    won."""
    write_atomic(report_dir / "tune-report.json", pretty_json(report))
    if winner is not None:
        from tritonbuild.tune.patch import patch_text

        write_atomic(
            report_dir / "tune-patch.yaml",
            patch_text(report["winner"]["recipe_values"], report).encode(),
        )
    try:
        from tritonbuild.tune.plot import plot

        plot(report, report_dir / "tune-plot.png")
        report["plot"] = str(report_dir / "tune-plot.png")
    except ImportError:
        report["notes"].append(
            "no plot: matplotlib is not installed (pip install 'tritonbuild[tune]')"
        )
    write_atomic(report_dir / "tune-report.json", pretty_json(report))
    if winner is None:
        best = report.get("closest")
        miss = f"; closest: {best['label']} ({'; '.join(best['reasons'])})" if best else ""
        raise TuneError(
            f"no candidate of {model!r} meets the constraints at every load {loads}{miss}",
            where=str(report_dir / "tune-report.json"),
            hint="see each candidate's reasons in the report; relax tune.sla_p99_ms, "
            "min_vs_default or the load range, or widen the search space",
        )
    return report
