"""serve and status: a repository served by the embedded tritonserver in the foreground, and what a
running tritonserver reports."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.table import Table

from tritonbuild import api
from tritonbuild.cli.app import app
from tritonbuild.cli.common import (
    _json,
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
from tritonbuild.errors import ServerError, VerifyError

if TYPE_CHECKING:
    from tritonbuild.api import ServeReady, Serving


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
    help="tritonserver's --strict-readiness: with it, /v2/health/ready is false while any model "
    "loads (every polling server at once during a publish); without it, ready once the server "
    "answers, and each model's own /v2/models/NAME/ready tells what it serves.",
)
@click.option(
    "--log-file",
    type=click.Path(path_type=Path),
    default=None,
    help="Where the server log goes (kept after the server stops) [default: a file in the temp "
    "dir, printed at start].",
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
    help="Also serve this Python-based backend (DIR holds its model.py, e.g. Triton's vLLM "
    "backend) and load the repository's models of it. Repeatable; the embedded tritonserver only.",
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
    """Serve a repository (a directory, or a publish target URL) with the embedded tritonserver in
    the foreground; Ctrl-C stops it. Then: tritonbuild infer http://127.0.0.1:8000 MODEL --goldens
    REPOSITORY."""
    if not api.is_url(repository):
        existing_dir(repository)
    log_file = log_file or Path(tempfile.gettempdir()) / f"tritonbuild-serve-{os.getpid()}.log"
    serving = api.serve(
        repository,
        endpoint_url=endpoint_url,
        control=control,
        ports=(http_port, grpc_port, metrics_port),
        log_path=log_file,
        log_verbose=log_verbose,
        poll_secs=poll_secs,
        serving=api.ServingTarget(tritonserver=tritonserver, triton_image=triton_image),
        backends=backend_dirs(backends),
        strict_readiness=strict_readiness,
    )
    # NOTE: started in the background by a script, SIGINT arrives ignored; serve always stops on it.
    _stop.seen = (
        False  # this serve's signals only (a process may run the command more than once: tests)
    )
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    _serve_until_stopped(serving, poll_secs, as_json)


def _stop(_signum: int, _frame) -> None:
    """Ctrl-C or SIGTERM: KeyboardInterrupt, remembered on the handler as `tritonbuild`'s own Ctrl-C
    handler remembers it (`seen`, which cli/interrupt.py reads). One that came while the server
    started, where the exception is swallowed (a `__del__` or weakref callback, where Python prints
    "Exception ignored" and goes on), still stops serve: its wait loop reads `seen` too."""
    _stop.seen = True
    raise KeyboardInterrupt


_stop.seen = False


def _serve_until_stopped(serving: Serving, poll_secs: int, as_json: bool) -> None:
    """Start the server, say it is ready, wait until Ctrl-C (or it dies: a ServerError with its
    log's tail); the server's start and loads raise verify's errors: serve's here."""
    server = serving.server
    try:
        ready = serving.start()
        if as_json:
            _json(ready)
        else:
            _print_ready(ready, poll_secs)
        sys.stdout.flush()
        while server.proc is not None and server.proc.poll() is None:
            if _stop.seen:
                raise KeyboardInterrupt
            time.sleep(0.5)
        raise ServerError(
            f"tritonserver exited unexpectedly:\n{server.log_tail()}",
            hint=f"see the server log {server.log_path}",
        )
    except KeyboardInterrupt:
        app().err.print(f"stopping tritonserver (its log stays at {server.log_path})")
    except (ServerError, VerifyError) as e:
        hint = e.hint
        if server.log_path.exists() and (hint is None or str(server.log_path) not in hint):
            hint = f"{hint + '; ' if hint else ''}see the server log {server.log_path}"
        raise ServerError(e.message, where=e.where, hint=hint) from None
    finally:
        server.cleanup()
        if server.unreaped is not None:
            app().err.print(
                f"warning: tritonserver (pid {server.unreaped}) was killed and had not exited yet; "
                "serve stops without it (the system reaps it once it goes)"
            )


def _print_ready(ready: ServeReady, poll_secs: int) -> None:
    out = app().out
    out.print(
        f"{ready.tritonserver} ready  HTTP {ready.http}  gRPC {ready.grpc}  metrics {ready.metrics}"
    )
    polling = ready.model_control_mode != "explicit"
    verb = f"polling every {poll_secs}s; loadable" if polling else "loaded"
    out.print(f"repository {ready.repository}; {verb}: {', '.join(ready.loaded) or '-'}")
    if ready.not_loaded:
        out.print(f"not loaded (backend not in the embedded server): {', '.join(ready.not_loaded)}")
    if line := python_line(ready.python_side):
        out.print(line)
    out.print(f"server log {ready.log}")
    out.print("Ctrl-C to stop")


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
