"""tune: serving configs of one built model measured under load, the winner checked bit for bit and
optionally written into its recipe."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.api.options import Progress
from tritonbuild.server.target import EMBEDDED, ServingTarget
from tritonbuild.tune.built import recipe_for, with_flags
from tritonbuild.tune.patch import apply_patch
from tritonbuild.tune.run import tune as _tune


def tune(
    root: Path,
    model: str,
    *,
    report_dir: Path,
    recipe_path: Path | None = None,
    server_url: str | None = None,
    grpc_url: str | None = None,
    brute: bool = False,
    no_verify: bool = False,
    processes: int | None = None,
    sla_ms: float | None = None,
    min_vs_default: float | None = None,
    concurrency: list[int] | None = None,
    confidence: float | None = None,
    rounds: int | None = None,
    max_rounds: int | None = None,
    baseline: str | None = None,
    apply: bool = False,
    serving: ServingTarget = EMBEDDED,
    progress: Progress | None = None,
) -> dict:
    """Measure serving configs of one built model (root is only read); the report, also written to
    report_dir (tune-report.json, tune-patch.yaml, tune-plot.png).

    recipe_path: the model's recipe (default: the one root was built from). server_url: tune on
    this tritonserver (explicit model control) instead of the embedded one; grpc_url: its gRPC
    endpoint (default: its host, port 8001). brute: measure every candidate at every load.
    no_verify: tune a model without goldens. processes: load generator processes (default: cores
    / 2). sla_ms (tune.sla_p99_ms), min_vs_default, concurrency, confidence, rounds, max_rounds,
    baseline: override those keys of the tune section. apply: write the winner into the recipe
    file. serving: the tritonserver that runs (else the embedded one) and, for the embedded one,
    the image whose Python runs its Python side. progress: progress lines."""
    rpath, spec = recipe_for(Path(root), model, recipe_path)
    spec = with_flags(
        spec,
        sla_p99_ms=sla_ms,
        min_vs_default=min_vs_default,
        concurrency=concurrency,
        confidence=confidence,
        rounds=rounds,
        max_rounds=max_rounds,
        baseline=baseline,
    )
    report = _tune(
        Path(root),
        model,
        report_dir=report_dir,
        recipe_path=recipe_path,
        server_url=server_url,
        grpc_url=grpc_url,
        brute=brute,
        no_verify=no_verify,
        processes=processes,
        tune_override=spec,
        progress=progress,
        serving=serving,
    )
    report["report_dir"] = str(report_dir)
    return _applied(report, rpath) if apply and report.get("winner") else report


def _applied(report: dict, recipe: Path) -> dict:
    """tune --apply: the winner's values written into the recipe file."""
    apply_patch(recipe, report["winner"]["recipe_values"])
    return {**report, "applied_to": str(recipe)}
