"""`tritonbuild serve ... --json` as the tests start it: a child process on free ports, and the
ready document it prints once its models are loaded."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

FREE_PORTS = ("--http-port", "0", "--grpc-port", "0", "--metrics-port", "0")
# Between a test client's requests while a server switches versions: unthrottled, the fleet test's 3 clients sent
# 32,537 requests in 40 s and took most of its 100 CPU seconds (one run alone, 66-72 paced in three; 2026-12-08,
# 2-core AMD EPYC), CPU the suite's other workers wait for; a server down for 20 ms is still met by a request.
TRAFFIC_GAP_S = 0.02


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


def stop_serve(proc: subprocess.Popen, timeout: float = 60) -> int:
    """Ctrl-C to a serve started by serve_json; its exit code. One still running `timeout` s later fails
    the test with what it was doing: every thread's stack (SIGUSR1, __main__'s faulthandler), the
    state of each process in its tree, what it printed; then it and its server are killed."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        tree = subprocess.run(
            ["ps", "-eo", "pid,ppid,pgid,stat,wchan:24,etime,args"], capture_output=True, text=True
        ).stdout
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        mine = _descendants(tree, proc.pid)
        for pid in mine:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
        rows = [row for row in tree.splitlines()[1:] if int(row.split()[0]) in mine]
        raise AssertionError(
            f"serve had not exited {timeout:g} s after Ctrl-C; its processes then:\n"
            + "\n".join(tree.splitlines()[:1] + rows)
            + f"\nwhat it printed on stderr (its threads' stacks last):\n{err[-6000:]}"
        ) from None


def _descendants(ps: str, root: int) -> list[int]:
    """root and every process below it in a `ps -eo pid,ppid,...` listing."""
    children: dict[int, list[int]] = {}
    for row in ps.splitlines()[1:]:
        pid, ppid = map(int, row.split()[:2])
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found
