"""verify, serve."""

from __future__ import annotations

import signal
import sys
import time

import click
from rich.table import Table
from rich.text import Text

from tritonbuild.cli.common import (
    _json,
    _progress,
    endpoint_option,
    err,
    existing_dir,
    json_option,
    main,
    out,
    print_table,
)


@main.command("verify")
@click.argument("repository")
@click.option("--server", "server_url", metavar="URL", help="Verify every model live against this tritonserver "
              "(HTTP, e.g. http://host:8000) instead of the embedded one.")
@click.option("--record", is_flag=True, help="Record golden outputs (to the recipes' verify.goldens and OUT).")
@endpoint_option
@json_option
def verify_command(repository: str, server_url: str | None, record: bool, endpoint_url: str | None,
                   as_json: bool) -> None:
    """Static checks, live load, golden inferences compared bit for bit.

    REPOSITORY is a built directory, or a publish target URL (s3://, gs://, az://, file://): then every
    published object is checked against the target manifest (presence, size, sha256).
    """
    from tritonbuild import api
    from tritonbuild.errors import VerifyError

    if "://" in repository:
        result = api.verify_target(repository, endpoint_url=endpoint_url)
        if as_json:
            _json(result)
        else:
            out.print(f"{result['target']}: {result['objects_checked']} objects checked")
            for p in result["problems"]:
                out.print(f"  FAIL {p}")
            out.print("PASSED" if result["passed"] else "FAILED")
        if not result["passed"]:
            sys.exit(VerifyError.exit_code)
        return
    repository = existing_dir(repository)

    if server_url and "://" not in server_url:
        server_url = f"http://{server_url}"
    with _progress(not as_json) as progress:
        report = api.verify_repository(repository, server_url=server_url, record=record, progress=progress)
    if as_json:
        _json(report.model_dump(mode="json"))
    else:
        _render_report(report)
    if not report.passed:
        if not as_json:
            err.print("[bold red]verification failed[/]", markup=True)
        sys.exit(VerifyError.exit_code)


def _render_report(report) -> None:
    bad = [c for c in report.static if not c.ok]
    out.print(f"static checks: {len(report.static) - len(bad)}/{len(report.static)} passed")
    for c in bad:
        out.print(f"  FAIL {c.model}: {c.check}: {c.detail}")
    if not report.models:
        return
    table = Table("model", "ver", "how verified", "loaded", "goldens", "bit-exact", "batching", "result", box=None)
    table.columns[0].no_wrap = True
    how = {"live-embedded": "live, embedded", "live-server": "live, --server", "in-process": "in-process",
           "none": "not run"}
    for m in report.models:
        exact = "-" if not m.compared else (f"yes ({m.samples}×{m.repeats})" if not m.mismatches else
                                            f"NO ({len(m.mismatches)} diffs)")
        table.add_row(m.name, str(m.version), how[m.path], "yes" if m.loaded else "no",
                      "recorded" if report.recorded and m.goldens else ("yes" if m.goldens else "none"), exact,
                      m.batch_invariance, Text("PASS", style="green") if m.passed else Text("FAIL", style="red"))
    print_table(table)
    for m in report.models:
        out.print(f"  {m.name}: {m.path_detail}")
        if m.load_error:
            out.print(f"  {m.name}: load error: {m.load_error}")
        for mm in m.mismatches[:5]:
            out.print(f"  {m.name}: output {mm.output!r} sample {mm.sample} ({mm.context}): {mm.differing}/{mm.total} "
                      f"elements differ, max |diff| {mm.max_abs_diff}, first at {mm.first_index}")
        for note in m.notes:
            out.print(f"  {m.name}: {note}")
    out.print(f"report: manifest {report.manifest_digest[:16]}, {'PASSED' if report.passed else 'FAILED'}")


@main.command("serve")
@click.argument("repository")
@endpoint_option
@json_option
def serve_command(repository: str, endpoint_url: str | None, as_json: bool) -> None:
    """Serve a repository (a directory, or a publish target URL) with the embedded tritonserver in the
    foreground; Ctrl-C stops it."""
    from tritonbuild import api
    from tritonbuild.errors import VerifyError

    if "://" not in repository:
        existing_dir(repository)
    server, loadable, skipped = api.serve(repository, endpoint_url=endpoint_url)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        server.start()
        for name in loadable:
            server.load(name)
        info = {"http": f"http://{server.http_url}", "grpc": server.grpc_url, "metrics": server.metrics_url,
                "repository": server.repository, "loaded": loadable, "not_loaded": skipped,
                "log": str(server.log_path)}
        if as_json:
            _json(info)
        else:
            out.print(f"tritonserver ready  HTTP {info['http']}  gRPC {info['grpc']}  metrics {info['metrics']}")
            out.print(f"repository {server.repository}; loaded: {', '.join(loadable) or '-'}")
            if skipped:
                out.print(f"not loaded (backend not in the embedded server): {', '.join(skipped)}")
            out.print("Ctrl-C to stop")
        sys.stdout.flush()
        while server.proc is not None and server.proc.poll() is None:
            time.sleep(0.5)
        raise VerifyError(f"tritonserver exited unexpectedly:\n{server.log_tail()}",
                               hint=f"see the server log {server.log_path}")
    except KeyboardInterrupt:
        err.print("stopping tritonserver")
    finally:
        server.cleanup()
