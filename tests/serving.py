"""`tritonbuild serve ... --json` as the tests start it: a child process on free ports, and the
ready document it prints once its models are loaded."""

from __future__ import annotations

import json
import subprocess
import sys

FREE_PORTS = ("--http-port", "0", "--grpc-port", "0", "--metrics-port", "0")


def serve_json(*args, env: dict | None = None) -> tuple[subprocess.Popen, dict]:
    """Starts `tritonbuild serve ARGS --json` on free ports; (the process, its ready document). A
    serve that exits first fails the test with what it printed (a bare readline loop spun forever on
    that)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tritonbuild", "serve", *map(str, args), "--json", *FREE_PORTS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines = []
    while (line := proc.stdout.readline()) not in ("}\n", ""):
        lines.append(line)
    text = "".join(lines) + "}"
    try:
        ready = json.loads(text)
    except ValueError:
        ready = None
    if (
        not isinstance(ready, dict) or "http" not in ready
    ):  # not the ready document: what serve said instead
        proc.kill()
        raise AssertionError(f"serve printed no ready document:\n{text}\n{proc.stderr.read()}")
    return proc, ready
