"""tune."""

from __future__ import annotations

from pathlib import Path

import click

from tritonbuild import api
from tritonbuild.cli.app import app
from tritonbuild.cli.common import _json, _progress, json_option, main, tritonserver_option


def _ints(_ctx, _param, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        items = [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None
    if not items or any(i < 1 for i in items):
        raise click.BadParameter(f"expected integers >= 1, got {value!r}")
    return items


@main.command("tune")
@click.argument("repository", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.argument("model")
@click.option(
    "--recipe",
    "recipe_path",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="The model's recipe (default: the one OUT was built from).",
)
@click.option(
    "--server",
    "server_url",
    metavar="URL",
    help="Tune on this tritonserver (HTTP URL; explicit model "
    "control; gRPC on port 8001 or $TRITONBUILD_GRPC_URL) instead of the embedded one.",
)
@click.option(
    "--grpc",
    "grpc_url",
    metavar="HOST:PORT",
    envvar="TRITONBUILD_GRPC_URL",
    help="--server's gRPC endpoint (default: its host, port 8001) [env TRITONBUILD_GRPC_URL].",
)
@click.option(
    "--brute",
    is_flag=True,
    help="Measure every candidate at every load (to check the quick search).",
)
@click.option(
    "--no-verify",
    is_flag=True,
    help="Tune a model without goldens (the report says it was not verified).",
)
@click.option(
    "--report-dir",
    type=click.Path(path_type=Path),
    help="Where the report, patch and plot go (default: ./tune-MODEL).",
)
@click.option(
    "--processes",
    type=click.IntRange(1, 256),
    help="Load generator processes (default: cores / 2).",
)
@click.option(
    "--sla-ms",
    type=click.FloatRange(min=0, min_open=True),
    help="p99 SLA in ms (overrides tune.sla_p99_ms).",
)
@click.option(
    "--min-vs-default",
    type=click.FloatRange(min=0, min_open=True),
    help="The winner must serve >= this × Triton's default at every load (overrides "
    "tune.min_vs_default).",
)
@click.option(
    "--confidence",
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    help="Confidence of the paired interval the rules are decided on (overrides tune.confidence).",
)
@click.option(
    "--rounds",
    type=click.IntRange(1, 50),
    help="Paired rounds of each finalist against the default (overrides tune.rounds; 1: single "
    "readings).",
)
@click.option(
    "--max-rounds",
    type=click.IntRange(1, 50),
    help="Paired rounds at most while a rule's interval holds its threshold (overrides "
    "tune.max_rounds; default twice --rounds).",
)
@click.option(
    "--baseline",
    type=click.Choice(["built", "plain"]),
    help="With tune.buckets: Triton's default serves the model as built or without its buckets "
    "(overrides tune.baseline).",
)
@click.option(
    "--concurrency", callback=_ints, help="Load range, e.g. 1,64 (overrides tune.concurrency)."
)
@click.option("--apply", "apply_patch", is_flag=True, help="Write the winner into the recipe file.")
@tritonserver_option
@json_option
def tune_command(
    repository: Path,
    model: str,
    recipe_path: Path | None,
    server_url: str | None,
    grpc_url: str | None,
    brute: bool,
    no_verify: bool,
    report_dir: Path | None,
    processes: int | None,
    sla_ms: float | None,
    min_vs_default: float | None,
    confidence: float | None,
    rounds: int | None,
    max_rounds: int | None,
    baseline: str | None,
    concurrency: list[int] | None,
    apply_patch: bool,
    tritonserver: str | None,
    as_json: bool,
) -> None:
    """Find MODEL's fastest serving config under a p99 SLA that is still bit-exact.

    Loads candidate configs of the built model (REPOSITORY is never modified), drives load with a
    multi-process gRPC client, verifies finalists with the goldens, and writes tune-report.json,
    tune-patch.yaml and tune-plot.png.
    """
    with _progress(not as_json) as say:
        report = api.tune(
            repository,
            model,
            report_dir=report_dir or Path(f"tune-{model}"),
            recipe_path=recipe_path,
            server_url=server_url,
            grpc_url=grpc_url,
            brute=brute,
            no_verify=no_verify,
            processes=processes,
            sla_ms=sla_ms,
            min_vs_default=min_vs_default,
            confidence=confidence,
            rounds=rounds,
            max_rounds=max_rounds,
            baseline=baseline,
            concurrency=concurrency,
            apply=apply_patch,
            serving=api.ServingTarget(tritonserver=tritonserver),
            progress=say,
        )
    if as_json:
        _json(report)
        return
    _print_report(report)


def _print_report(report: dict) -> None:
    """The winner and how it was found, tuned vs default per load, what was not chosen and why."""
    out = app().out
    out.print(
        f"{report['model']}: {report['winner']['label']}  ({report['search']} search, "
        f"{report['measurements_made']} measurements of {report['grid_measurements']} in the grid, "
        f"{report['measurement_share']:.0%}; {report['paired_measurements']} paired)"
    )
    out.print(f"  {report['verdict']}")
    if report.get("baseline"):
        out.print(f"  baseline: {report['baseline']['text']}")
    for load, c in report["comparison"].items():
        interval = f" [{c['low']}–{c['high']}]" if c.get("low") is not None else ""
        out.print(
            f"  {load:>6}: {c['tuned']['throughput']:9.0f} req/s  p99 {c['tuned']['p99_ms']:.2f} "
            f"ms   default {c['default']['throughput']:9.0f} req/s  p99 "
            f"{c['default']['p99_ms']:.2f} ms   {c['ratio']}x{interval}"
        )
    if report["pick"]["runner_up"]:
        out.print(f"  pick: {report['pick']['text']}")
    out.print(
        f"  load generator ceiling: {report['ceiling']['throughput']:.0f} req/s "
        f"({report['machine']['load_processes']} processes)"
    )
    for rejected in report["rejections"]:
        out.print(
            f"  not chosen {rejected['label']}: {rejected['cause']} ({rejected['decided_by']}): "
            f"{rejected['detail']}"
        )
    for note in report["notes"]:
        out.print(f"  note: {note}")
    out.print(
        f"report: {report['report_dir']}/tune-report.json; patch: tune-patch.yaml"
        + ("; recipe updated" if report.get("applied_to") else "")
    )
