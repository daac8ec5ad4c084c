"""verify: a built repository's static checks, live loads and goldens, or a publish target's
objects, and the report's rendering."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from tritonbuild import api
from tritonbuild.cli.app import app
from tritonbuild.cli.common import (
    _json,
    _progress,
    backend_dirs,
    endpoint_option,
    existing_dir,
    json_option,
    main,
    print_table,
    triton_image_option,
    tritonserver_option,
)
from tritonbuild.cli.python_side import python_line
from tritonbuild.errors import VerifyError


@main.command(
    "verify",
    help=f"""Static checks, live load, golden inferences compared bit for bit.

    REPOSITORY is a built directory, or a publish target URL ({api.url_prefixes()}): then
    every published object is checked against the target manifest (presence, size, sha256).
    """,
)
@click.argument("repository")
@click.option(
    "--server",
    "server_url",
    metavar="URL",
    help="Verify every model live against this tritonserver "
    "(HTTP, e.g. http://host:8000) instead of the embedded one.",
)
@click.option(
    "--server-log",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="FILE",
    help="With --server: that server's log, read for what its runtimes chose (an invariant vLLM "
    "model's plugin and kernels); the embedded server's own log is always read.",
)
@click.option(
    "--record", is_flag=True, help="Record golden outputs (to the recipes' verify.goldens and OUT)."
)
@click.option("--force", is_flag=True, help="With --record: replace committed goldens that differ.")
@click.option(
    "--rebuild",
    is_flag=True,
    help="Also rebuild the recipes in an isolated cache and compare every "
    "artefact's sha256 (run from where the build ran).",
)
@click.option(
    "--load-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    metavar="SECONDS",
    help="A model the embedded tritonserver has not loaded by then fails (its row "
    "names the server log's lines for it) instead of hanging verify.",
)
@click.option(
    "--backend",
    "backends",
    multiple=True,
    metavar="NAME=DIR",
    help="Serve this Python-based backend (DIR holds its model.py, e.g. Triton's vLLM backend) in "
    "the embedded tritonserver and verify its models there, as serve runs them. Repeatable.",
)
@endpoint_option
@tritonserver_option
@triton_image_option
@json_option
def verify_command(
    repository: str,
    server_url: str | None,
    server_log: Path | None,
    record: bool,
    force: bool,
    rebuild: bool,
    load_timeout: float,
    backends: tuple[str, ...],
    endpoint_url: str | None,
    tritonserver: str | None,
    triton_image: str | None,
    as_json: bool,
) -> None:
    # NOTE: a directory holding a publish target (a synced copy) is verified as the target it is
    target = api.target_url(repository)
    if target is not None:
        _verify_target(api.parse_location(target, endpoint_url), as_json)
        return
    repository = existing_dir(repository)

    if server_url:
        server_url = api.with_scheme(server_url)
    with _progress(not as_json) as progress:
        report = api.verify_repository(
            repository,
            server_url=server_url,
            server_log=server_log,
            record=record,
            progress=progress,
            force=force,
            rebuild=rebuild,
            load_timeout=load_timeout,
            serving=api.ServingTarget(tritonserver=tritonserver, triton_image=triton_image),
            backends=backend_dirs(backends) or None,
        )
    hint = report.accept_hint(str(repository))
    if as_json:
        _json({**report.model_dump(mode="json"), **({"hint": hint} if hint else {})})
    else:
        _render_report(report)
    if not report.passed:
        if not as_json:
            _say_why_not_passed(report, hint)
        sys.exit(VerifyError.exit_code)


def _verify_target(target, as_json: bool) -> None:
    """Every object a target's manifest lists: present, its size, its sha256."""
    result = api.verify_target(target)
    if as_json:
        _json(result)
    else:
        app().out.print(f"{result.target}: {result.objects_checked} objects checked")
        for problem in result.problems:
            app().out.print(f"  FAIL {problem}")
        app().out.print("PASSED" if result.passed else "FAILED")
    if not result.passed:
        sys.exit(VerifyError.exit_code)


def _say_why_not_passed(report, hint: str | None) -> None:
    """Failed, or incomplete (models this machine cannot run), and the hint to accept it."""
    not_checked = _verdict(report).startswith("NOT CHECKED")
    app().err.print(
        "[bold yellow]verification incomplete: models not checked here; verify them with "
        "--server URL where their backend runs[/]"
        if not_checked
        else "[bold red]verification failed[/]",
        markup=True,
    )
    if hint:
        app().err.print(f"  hint: {hint}", markup=False)


def _render_report(report) -> None:
    out = app().out
    _print_static(report)
    if not report.manifest_digest:
        out.print(
            f"{'PASSED' if report.passed else 'FAILED'} (no tritonbuild manifest: Triton's config "
            "rules, Triton's core through stand-in models, hand-written Python models loaded "
            "themselves; no goldens)"
        )
        return
    if not report.models:
        return
    print_table(_models_table(report))
    for model_report in report.models:
        _print_model_lines(model_report)
    rebuild = report.reproducibility
    if rebuild is not None:
        out.print(
            f"rebuild: {rebuild.identical} files byte-identical, {len(rebuild.differ)} differ, "
            f"{len(rebuild.by_nature)} left to goldens"
        )
        for line in [*rebuild.differ, *rebuild.by_nature]:
            out.print(f"  {line}")
    out.print(f"report: manifest {report.manifest_digest[:16]}, {_verdict(report)}")


def _print_static(report) -> None:
    """The static checks' count, each failure, and each check this machine could not run."""
    out = app().out
    bad = [check for check in report.static if not check.ok]
    out.print(f"static checks: {len(report.static) - len(bad)}/{len(report.static)} passed")
    for check in bad:
        out.print(f"  FAIL {check.model}: {check.check}: {check.detail}")
    if report.python_side is not None and (line := python_line(report.python_side)):
        out.print(line)
    for check in report.static:
        # this machine's lack (a package, the network, a path), not the model's fault
        if check.ok and check.detail.startswith("not loaded here"):
            out.print(f"  NOT CHECKED HERE {check.model}: {check.detail}")


HOW_VERIFIED = {
    "live-embedded": "live, embedded",
    "live-server": "live, --server",
    "in-process": "in-process",
    "none": "not run",
}


def _models_table(report) -> Table:
    """One row per model: how it was verified, loaded, goldens, bit-exactness, batching, result."""
    headers = ("model", "ver", "how verified", "loaded", "goldens", "bit-exact", "batching")
    table = Table(*headers, "result", box=None)
    table.columns[0].no_wrap = True
    for model_report in report.models:
        table.add_row(
            model_report.name,
            str(model_report.version),
            HOW_VERIFIED[model_report.route],
            "yes" if model_report.loaded else "no",
            _goldens_cell(model_report, report.recorded),
            _exact_cell(model_report),
            model_report.batch_invariance,
            _result_cell(model_report),
        )
    return table


def _exact_cell(model_report) -> str:
    if not model_report.compared:
        return "-"
    if model_report.mismatches:
        return f"NO ({len(model_report.mismatches)} diffs)"
    if model_report.tolerated:
        return "within tolerance"
    return f"yes ({model_report.samples}×{model_report.repeats})"


def _goldens_cell(model_report, recorded: bool) -> str:
    if model_report.goldens_refused:
        return "refused"
    if model_report.goldens:
        return "recorded" if recorded else "yes"
    return "none"


def _print_model_lines(model_report) -> None:
    """A model's route, the server that served it, its errors, first mismatches and notes."""
    out, name = app().out, model_report.name
    out.print(f"  {name}: {model_report.route_detail}")
    if (served := model_report.served) is not None:
        same = (
            "= ours"
            if served["config_sha256"] == served["ours_config_sha256"]
            else f"!= ours {served['ours_config_sha256'][:12]}"
        )
        out.print(
            f"  {name}: served by {served['server']}: versions {served['ready_versions']} ready, "
            f"config {served['config_sha256'][:12]} {same}"
        )
    if model_report.load_error:
        out.print(f"  {name}: load error: {model_report.load_error}")
    if model_report.infer_error:
        out.print(f"  {name}: inference failed: {model_report.infer_error}")
    for mismatch in model_report.mismatches[:5]:
        out.print(
            f"  {name}: output {mismatch.output!r} sample {mismatch.sample} ({mismatch.context}): "
            f"{mismatch.differing}/{mismatch.total} elements differ, max |diff| "
            f"{mismatch.max_abs_diff}"
            + (f" ({mismatch.max_ulp} ULP)" if mismatch.max_ulp is not None else "")
            + f", first at {mismatch.first_index}"
        )
    for note in model_report.notes:
        out.print(f"  {name}: {note}")


def _result_cell(model_report) -> Text:
    if not model_report.checked:
        return Text("not checked here", style="yellow")
    return Text("PASS", style="green") if model_report.passed else Text("FAIL", style="red")


def _verdict(report) -> str:
    """PASSED, FAILED (a check failed), or NOT CHECKED (nothing failed, but some models could not
    run here)."""
    if report.passed:
        return "PASSED"
    unchecked = [each.name for each in report.models if not each.checked]
    failed = (
        [each for each in report.models if each.checked and not each.passed]
        or [check for check in report.static if not check.ok]
        or (report.reproducibility is not None and not report.reproducibility.reproducible)
    )
    if unchecked and not failed:
        return (
            f"NOT CHECKED ({len(unchecked)} of {len(report.models)} models could not run here: "
            f"{unchecked})"
        )
    return "FAILED"
