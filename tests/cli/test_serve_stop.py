"""`tritonbuild serve` stops on Ctrl-C or SIGTERM even when the KeyboardInterrupt its handler raised never
reached serve's own code: a Ctrl-C that came while the server was starting, in a place that turns the
exception into nothing (a `__del__` or a weakref callback, where Python prints "Exception ignored" and goes
on; an event loop's error handler), left serve waiting on a healthy server, deaf to that Ctrl-C (seen in CI:
`test_serve_is_not_ready_before_its_models_are`, serve still in its wait loop 60 s after the signal)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

# A serve whose start receives the signal where the exception is swallowed (a stand-in for the library code
# that does so; the server, a real process that stays up, is what serve waits on), then is ready.
SWALLOWED = textwrap.dedent("""
    import os, signal, subprocess, sys, tempfile
    from pathlib import Path
    from types import SimpleNamespace
    import tritonbuild.cli.serve as serve_cli
    from tritonbuild.__main__ import run

    SIGNAL = getattr(signal, sys.argv[1])
    proc = subprocess.Popen(["sleep", "120"])
    log = Path(tempfile.mkdtemp()) / "server.log"
    log.write_text("")

    def cleanup():
        proc.kill()
        proc.wait()

    server = SimpleNamespace(proc=proc, log_path=log, unreaped=None, cleanup=cleanup, log_tail=lambda: "")

    def start():
        try:
            os.kill(os.getpid(), SIGNAL)
            for _ in range(100):  # the handler runs at the next bytecode boundary
                pass
        except KeyboardInterrupt:
            pass  # swallowed where serve cannot see it
        print("started", file=sys.stderr, flush=True)
        return {"http": "http://127.0.0.1:1"}

    serve_cli.api.serve = lambda *a, **k: SimpleNamespace(server=server, start=start)
    serve_cli._json = lambda ready: print(ready, flush=True)
    sys.argv = ["tritonbuild", "serve", sys.argv[2], "--json"]
    run()
""")


def _serve(tmp_path, signal_name: str) -> tuple[subprocess.CompletedProcess, float]:
    began = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-c", SWALLOWED, signal_name, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    return r, time.monotonic() - began


def test_a_ctrl_c_swallowed_during_start_still_stops_serve(tmp_path):
    r, took = _serve(tmp_path, "SIGINT")
    assert "started" in r.stderr, r.stderr
    assert r.returncode == 0, r.stderr
    assert "stopping tritonserver" in r.stderr, r.stderr
    assert took < 30, f"serve took {took:.0f} s to stop"


def test_a_sigterm_swallowed_during_start_still_stops_serve(tmp_path):
    r, took = _serve(tmp_path, "SIGTERM")
    assert "started" in r.stderr, r.stderr
    assert r.returncode == 0, r.stderr  # a process manager's stop: served, then stopped as asked
    assert "stopping tritonserver" in r.stderr, r.stderr
    assert took < 30, f"serve took {took:.0f} s to stop"


def test_a_stop_asked_of_an_earlier_serve_in_the_process_does_not_stop_the_next(
    cli, tmp_path, monkeypatch
):
    """The signals serve remembers are its own: a second serve in the same process (tests run the command
    in-process) waits on its server, here until the server exits (exit 8), not until a stale Ctrl-C."""
    import subprocess
    from types import SimpleNamespace

    import tritonbuild.cli.serve as serve_cli

    log = tmp_path / "server.log"
    log.write_text("")
    proc = subprocess.Popen(["sleep", "1"])
    server = SimpleNamespace(
        proc=proc,
        log_path=log,
        unreaped=None,
        cleanup=lambda: proc.wait(),
        log_tail=lambda: "its log",
    )
    monkeypatch.setattr(
        serve_cli.api, "serve", lambda *a, **k: SimpleNamespace(server=server, start=lambda: {})
    )
    monkeypatch.setattr(serve_cli, "_json", lambda ready: None)
    monkeypatch.setattr(serve_cli._stop, "seen", True)  # an earlier serve's Ctrl-C
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        r = cli("serve", tmp_path, "--json")
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    assert r.exit_code == 8, (
        r.exit_code,
        r.output,
    )  # ServerError: the server exited; no stale stop
