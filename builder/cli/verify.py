"""verify, serve, infer, status."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from tritonbuild.cli.app import app
from tritonbuild.cli.common import (
    _json,
    _progress,
    endpoint_option,
    existing_dir,
    json_option,
    key_values,
    main,
    print_table,
    triton_image_option,
    tritonserver_option,
)
from tritonbuild.cli.python_side import python_line
from tritonbuild.core.stores import is_url, parse_location


@main.command("verify")
@click.argument("repository")
@click.option(
    "--server",
    "server_url",
    metavar="URL",
    help="Verify every model live against this tritonserver "
    "(HTTP, e.g. http://host:8000) instead of the embedded one.",
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
    help="Serve this Python-based backend (DIR holds its model.py, e.g. Triton's vLLM backend) in the "
    "embedded tritonserver and verify its models there, as serve runs them. Repeatable.",
)
@endpoint_option
@tritonserver_option
@triton_image_option
@json_option
def verify_command(
    repository: str,
    server_url: str | None,
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
    """Static checks, live load, golden inferences compared bit for bit.

    REPOSITORY is a built directory, or a publish target URL (s3://, gs://, az://, file://): then every
    published object is checked against the target manifest (presence, size, sha256).
    """
    from tritonbuild import api
    from tritonbuild.errors import VerifyError

    if is_url(repository):
        result = api.verify_target(parse_location(repository, endpoint_url))
        if as_json:
            _json(result)
        else:
            app().out.print(f"{result.target}: {result.objects_checked} objects checked")
            for problem in result.problems:
                app().out.print(f"  FAIL {problem}")
            app().out.print("PASSED" if result.passed else "FAILED")
        if not result.passed:
            sys.exit(VerifyError.exit_code)
        return
    repository = existing_dir(repository)

    if server_url and "://" not in server_url:
        server_url = f"http://{server_url}"
    with _progress(not as_json) as progress:
        report = api.verify_repository(
            repository,
            server_url=server_url,
            record=record,
            progress=progress,
            force=force,
            rebuild=rebuild,
            load_timeout=load_timeout,
            tritonserver=tritonserver,
            backends=_backend_dirs(backends) or None,
            triton_image=triton_image,
        )
    hint = report.accept_hint(str(repository))
    if as_json:
        _json({**report.model_dump(mode="json"), **({"hint": hint} if hint else {})})
    else:
        _render_report(report)
    if not report.passed:
        if not as_json:
            verdict = _verdict(report)
            app().err.print(
                "[bold yellow]verification incomplete: models not checked here; verify them with "
                "--server URL where their backend runs[/]"
                if verdict.startswith("NOT CHECKED")
                else "[bold red]verification failed[/]",
                markup=True,
            )
            if hint:
                app().err.print(f"  hint: {hint}", markup=False)
        sys.exit(VerifyError.exit_code)


def _render_report(report) -> None:
    out = app().out
    bad = [check for check in report.static if not check.ok]
    out.print(f"static checks: {len(report.static) - len(bad)}/{len(report.static)} passed")
    for check in bad:
        out.print(f"  FAIL {check.model}: {check.check}: {check.detail}")
    if report.python_side is not None and (line := python_line(report.python_side)):
        out.print(line)
    for check in (
        report.static
    ):  # this machine's lack (a package, the network, a path), not the model's fault
        if check.ok and check.detail.startswith("not loaded here"):
            out.print(f"  NOT CHECKED HERE {check.model}: {check.detail}")
    if not report.manifest_digest:
        out.print(
            f"{'PASSED' if report.passed else 'FAILED'} (no tritonbuild manifest: Triton's config rules, "
            "Triton's core through stand-in models, hand-written Python models loaded themselves; no goldens)"
        )
        return
    if not report.models:
        return
    table = Table(
        "model",
        "ver",
        "how verified",
        "loaded",
        "goldens",
        "bit-exact",
        "batching",
        "result",
        box=None,
    )
    table.columns[0].no_wrap = True
    how = {
        "live-embedded": "live, embedded",
        "live-server": "live, --server",
        "in-process": "in-process",
        "none": "not run",
    }
    for model_report in report.models:
        exact = (
            "-"
            if not model_report.compared
            else (
                f"NO ({len(model_report.mismatches)} diffs)"
                if model_report.mismatches
                else "within tolerance"
                if model_report.tolerated
                else f"yes ({model_report.samples}×{model_report.repeats})"
            )
        )
        goldens = (
            "refused"
            if model_report.goldens_refused
            else "recorded"
            if report.recorded and model_report.goldens
            else "yes"
            if model_report.goldens
            else "none"
        )
        table.add_row(
            model_report.name,
            str(model_report.version),
            how[model_report.route],
            "yes" if model_report.loaded else "no",
            goldens,
            exact,
            model_report.batch_invariance,
            _result_cell(model_report),
        )
    print_table(table)
    for model_report in report.models:
        name = model_report.name
        out.print(f"  {name}: {model_report.route_detail}")
        if (served := model_report.served) is not None:
            same = (
                "= ours"
                if served["config_sha256"] == served["ours_config_sha256"]
                else f"!= ours {served['ours_config_sha256'][:12]}"
            )
            out.print(
                f"  {name}: served by {served['server']}: versions {served['ready_versions']} ready, config "
                f"{served['config_sha256'][:12]} {same}"
            )
        if model_report.load_error:
            out.print(f"  {name}: load error: {model_report.load_error}")
        if model_report.infer_error:
            out.print(f"  {name}: inference failed: {model_report.infer_error}")
        for mismatch in model_report.mismatches[:5]:
            out.print(
                f"  {name}: output {mismatch.output!r} sample {mismatch.sample} ({mismatch.context}): "
                f"{mismatch.differing}/{mismatch.total} elements differ, max |diff| {mismatch.max_abs_diff}, "
                f"first at {mismatch.first_index}"
            )
        for note in model_report.notes:
            out.print(f"  {name}: {note}")
    rebuild = report.reproducibility
    if rebuild is not None:
        out.print(
            f"rebuild: {rebuild.identical} files byte-identical, {len(rebuild.differ)} differ, "
            f"{len(rebuild.by_nature)} left to goldens"
        )
        for line in [*rebuild.differ, *rebuild.by_nature]:
            out.print(f"  {line}")
    out.print(f"report: manifest {report.manifest_digest[:16]}, {_verdict(report)}")


def _result_cell(model_report) -> Text:
    if not model_report.checked:
        return Text("not checked here", style="yellow")
    return Text("PASS", style="green") if model_report.passed else Text("FAIL", style="red")


def _verdict(report) -> str:
    """PASSED, FAILED (a check failed), or NOT CHECKED (nothing failed, but some models could not run here)."""
    if report.passed:
        return "PASSED"
    unchecked = [each.name for each in report.models if not each.checked]
    failed = (
        [each for each in report.models if each.checked and not each.passed]
        or [check for check in report.static if not check.ok]
        or (report.reproducibility is not None and not report.reproducibility.reproducible)
    )
    if unchecked and not failed:
        return f"NOT CHECKED ({len(unchecked)} of {len(report.models)} models could not run here: {unchecked})"
    return "FAILED"


@main.command("serve")
@click.argument("repository")
@click.option(
    "--http-port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="HTTP port (0: a free one).",
)
@click.option(
    "--grpc-port",
    type=click.IntRange(0, 65535),
    default=8001,
    show_default=True,
    help="gRPC port (0: a free one).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=8002,
    show_default=True,
    help="Metrics port (0: a free one).",
)
@click.option(
    "--model-control-mode",
    "control",
    type=click.Choice(["explicit", "poll"]),
    default="explicit",
    show_default=True,
    help="explicit: load the models once at start; poll: tritonserver loads what the "
    "repository holds and follows changes (e.g. a publish to the target).",
)
@click.option(
    "--repository-poll-secs",
    "poll_secs",
    type=click.IntRange(1),
    default=5,
    show_default=True,
    help="With --model-control-mode poll: how often the server re-reads the repository.",
)
@click.option(
    "--strict-readiness/--no-strict-readiness",
    "strict_readiness",
    default=True,
    show_default=True,
    help="tritonserver's --strict-readiness: with it, /v2/health/ready is false while any model loads "
    "(every polling server at once during a publish); without it, ready once the server answers, "
    "and each model's own /v2/models/NAME/ready tells what it serves.",
)
@click.option(
    "--log-file",
    type=click.Path(path_type=Path),
    default=None,
    help="Where the server log goes (kept after the server stops) [default: a file in the temp dir, "
    "printed at start].",
)
@click.option(
    "--log-verbose",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="tritonserver's --log-verbose level.",
)
@click.option(
    "--backend",
    "backends",
    multiple=True,
    metavar="NAME=DIR",
    help="Also serve this Python-based backend (DIR holds its model.py, e.g. Triton's vLLM backend) and "
    "load the repository's models of it. Repeatable; the embedded tritonserver only.",
)
@endpoint_option
@tritonserver_option
@triton_image_option
@json_option
def serve_command(
    repository: str,
    http_port: int,
    grpc_port: int,
    metrics_port: int,
    control: str,
    poll_secs: int,
    strict_readiness: bool,
    log_file: Path | None,
    log_verbose: int,
    backends: tuple[str, ...],
    endpoint_url: str | None,
    tritonserver: str | None,
    triton_image: str | None,
    as_json: bool,
) -> None:
    """Serve a repository (a directory, or a publish target URL) with the embedded tritonserver in the
    foreground; Ctrl-C stops it. Then: tritonbuild infer http://127.0.0.1:8000 MODEL --goldens REPOSITORY."""
    import os
    import tempfile

    from tritonbuild import api
    from tritonbuild.errors import ServerError, VerifyError

    if "://" not in repository:
        existing_dir(repository)
    log_file = log_file or Path(tempfile.gettempdir()) / f"tritonbuild-serve-{os.getpid()}.log"
    server, loadable, skipped = api.serve(
        repository,
        endpoint_url=endpoint_url,
        control=control,
        ports=(http_port, grpc_port, metrics_port),
        log_path=log_file,
        log_verbose=log_verbose,
        poll_secs=poll_secs,
        tritonserver=tritonserver,
        backends=_backend_dirs(backends),
        strict_readiness=strict_readiness,
        triton_image=triton_image,
    )
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    # NOTE: started in the background by a script, SIGINT arrives ignored; serve always stops on it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        server.start()
        if control == "explicit":
            for name in loadable:
                server.load(name)
        info = {
            "http": f"http://{server.http_url}",
            "grpc": server.grpc_url,
            "metrics": server.metrics_url,
            "tritonserver": server.describe(),
            "version": server.version,
            "repository": server.repository,
            "loaded": loadable,
            "not_loaded": skipped,
            "model_control_mode": control,
            "strict_readiness": strict_readiness,
            "log": str(server.log_path),
            "python_side": server.launcher.python_side(),
        }
        if as_json:
            _json(info)
        else:
            app().out.print(
                f"{info['tritonserver']} ready  HTTP {info['http']}  gRPC {info['grpc']}  metrics "
                f"{info['metrics']}"
            )
            verb = "loaded" if control == "explicit" else f"polling every {poll_secs}s; loadable"
            app().out.print(f"repository {server.repository}; {verb}: {', '.join(loadable) or '-'}")
            if skipped:
                app().out.print(
                    f"not loaded (backend not in the embedded server): {', '.join(skipped)}"
                )
            if line := python_line(info["python_side"]):
                app().out.print(line)
            app().out.print(f"server log {server.log_path}")
            app().out.print("Ctrl-C to stop")
        sys.stdout.flush()
        while server.proc is not None and server.proc.poll() is None:
            time.sleep(0.5)
        raise ServerError(
            f"tritonserver exited unexpectedly:\n{server.log_tail()}",
            hint=f"see the server log {server.log_path}",
        )
    except KeyboardInterrupt:
        app().err.print(f"stopping tritonserver (its log stays at {server.log_path})")
    except (
        ServerError,
        VerifyError,
    ) as e:  # the server's start and loads raise verify's errors: serve's here
        hint = e.hint
        if server.log_path.exists() and (hint is None or str(server.log_path) not in hint):
            hint = f"{hint + '; ' if hint else ''}see the server log {server.log_path}"
        raise ServerError(e.message, where=e.where, hint=hint) from None
    finally:
        server.cleanup()


def _backend_dirs(specs: tuple[str, ...]) -> dict[str, Path]:
    from tritonbuild.errors import UsageError
    from tritonbuild.server.launcher import BACKEND_ENTRY

    out = {name: Path(path) for name, path in key_values(specs, "--backend", "NAME=DIR").items()}
    for name, path in out.items():
        if not (path / BACKEND_ENTRY).is_file():
            raise UsageError(
                f"--backend {name}={path}: expected NAME=DIR with DIR/{BACKEND_ENTRY}",
                hint="e.g. --backend vllm=vllm_backend/src (Triton's vLLM backend)",
            )
    return out


@main.command("infer")
@click.argument("target")
@click.argument("model")
@click.option(
    "--input",
    "input_files",
    multiple=True,
    metavar="NAME=FILE.npy",
    help="Send this array as input NAME (repeatable; batch dimension first when the model batches). "
    "Default: the model's goldens.",
)
@click.option(
    "--goldens",
    "goldens_from",
    type=click.Path(path_type=Path),
    metavar="OUT",
    help="With a server URL: take the goldens from this built repository.",
)
@tritonserver_option
@click.option(
    "--data",
    type=click.Choice(["random", "zeros"]),
    default=None,
    help="Send one request of generated data of the shapes the server declares (random: seeded; a "
    "variable dimension is 1) [default when there are no goldens and no --input: random].",
)
@json_option
def infer_command(
    target: str,
    model: str,
    input_files: tuple[str, ...],
    goldens_from: Path | None,
    tritonserver: str | None,
    data: str | None,
    as_json: bool,
) -> None:
    """Send MODEL its goldens (or --input arrays, or --data) and print the outputs.

    TARGET is a running server (http://host:8000, e.g. from 'tritonbuild serve') or a repository directory
    (built or hand-written), which the embedded tritonserver serves for this one call."""
    import re

    import numpy as np

    from tritonbuild import api
    from tritonbuild.errors import InferenceError, UsageError, VerifyError

    if "://" not in target:
        if not Path(target).exists() and re.fullmatch(r"[A-Za-z0-9.\-]+:[0-9]{1,5}", target):
            raise UsageError(
                f"{target!r} is not a directory; as a server address it needs its scheme",
                hint=f"tritonbuild infer http://{target} {model}",
            )
        existing_dir(target)
    if goldens_from is not None:
        existing_dir(goldens_from)
    given = {
        name: Path(path)
        for name, path in key_values(input_files, "--input", "NAME=FILE.npy").items()
    }
    try:
        result = api.infer(
            target,
            model,
            inputs=given or None,
            goldens_from=goldens_from,
            data=data,
            tritonserver=tritonserver,
        )
    except (
        VerifyError
    ) as e:  # the embedded server's start (for a directory) raises verify's error: infer's here
        raise InferenceError(e.message, where=e.where, hint=e.hint) from None
    bad = [
        i for i, sample in enumerate(result.samples) if sample["golden"] not in (None, "bit-exact")
    ]
    if as_json:
        _json(
            {
                **result.to_dict(),
                "samples": [
                    {
                        "golden": sample["golden"],
                        "outputs": {
                            k: {"dtype": str(v.dtype), "shape": list(v.shape), "data": v.tolist()}
                            for k, v in sample["outputs"].items()
                        },
                    }
                    for sample in result.samples
                ],
            }
        )
    else:
        app().out.print(
            f"{result.model} on {result.server}: {len(result.samples)} request(s), inputs: "
            f"{result.inputs}"
            + (
                " (seeded, generated from the model's metadata)"
                if result.inputs == "random"
                else ""
            )
        )
        for i, sample in enumerate(result.samples):
            app().out.print(
                f"sample {i}" + (f"  (golden: {sample['golden']})" if sample["golden"] else "")
            )
            for name, arr in sample["outputs"].items():
                text = np.array2string(arr, threshold=20, max_line_width=100).replace(
                    "\n", "\n    "
                )
                app().out.print(f"  {name}  {arr.dtype} {list(arr.shape)}\n    {text}")
    if bad:
        raise InferenceError(
            f"{len(bad)} of {len(result.samples)} answers differ from the goldens (samples {bad})",
            hint=f"tritonbuild verify {target if '://' not in target else goldens_from} shows where",
        )


@main.command("status")
@click.argument("url")
@click.option(
    "--metrics-url",
    metavar="URL",
    help="Triton's metrics endpoint [default: URL's host, port 8002].",
)
@json_option
def status_command(url: str, metrics_url: str | None, as_json: bool) -> None:
    """A running tritonserver at URL (http://host:8000): health, version, its models with state and
    versions, each ready model's config, and inference counters from the metrics endpoint."""
    from tritonbuild import api
    from tritonbuild.errors import ServerError

    result = api.status(url, metrics_url)
    out = app().out
    if as_json:
        _json(result)
    else:
        out.print(
            f"{result.server}: tritonserver {result.version or '?'}, live "
            f"{'yes' if result.live else 'NO'}, ready {'yes' if result.ready else 'NO'}"
        )
        table = Table(
            "model",
            "ver",
            "state",
            "backend",
            "batch",
            "inputs",
            "outputs",
            "instances",
            "ok/failed",
            box=None,
        )
        for row in result.models:
            config, counters = row.config or {}, row.metrics
            table.add_row(
                row.name,
                str(row.version or "-"),
                row.state + (f" ({row.reason})" if row.reason else ""),
                config.get("backend", ""),
                str(config.get("max_batch_size", "")),
                "; ".join(config.get("inputs", [])),
                "; ".join(config.get("outputs", [])),
                ", ".join(config.get("instances", [])),
                f"{counters.get('nv_inference_request_success', 0):.0f}/"
                f"{counters.get('nv_inference_request_failure', 0):.0f}"
                if counters
                else "-",
            )
        print_table(table)
        for note in result.notes:
            out.print(f"note: {note}")
    if not (result.live and result.ready):
        sys.exit(ServerError.exit_code)
