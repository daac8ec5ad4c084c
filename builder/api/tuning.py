"""tune: serving configs of one built model measured under load, the winner checked bit for bit and
optionally written into its recipe."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.tune.built import recipe_for, with_flags
from tritonbuild.tune.patch import apply_patch
from tritonbuild.tune.run import tune as _tune


def tune(
    root: Path,
    model: str,
    *,
    report_dir: Path,
    sla_ms: float | None = None,
    min_vs_default: float | None = None,
    concurrency: list[int] | None = None,
    apply: bool = False,
    confidence: float | None = None,
    rounds: int | None = None,
    baseline: str | None = None,
    **options,
) -> dict:
    """Measure serving configs of one built model; optionally write the winner into its recipe."""
    rpath, spec = recipe_for(Path(root), model, options.get("recipe_path"))
    spec = with_flags(
        spec,
        sla_p99_ms=sla_ms,
        min_vs_default=min_vs_default,
        concurrency=concurrency,
        confidence=confidence,
        rounds=rounds,
        baseline=baseline,
    )
    report = _tune(Path(root), model, report_dir=report_dir, tune_override=spec, **options)
    report["report_dir"] = str(report_dir)
    if apply and report.get("winner"):
        apply_patch(rpath, report["winner"]["recipe_values"])
        report["applied_to"] = str(rpath)
    return report
