"""EmbeddedServer's own logic that needs no running server."""

from __future__ import annotations

import signal
import subprocess
import types

from tritonbuild.server.embedded import EmbeddedServer
from tritonbuild.server.ports import free_ports

# tritonserver 2.51's answer to an option it does not know: the reason, then 80-odd lines of usage
REFUSED = (
    "/opt/tritonserver/bin/tritonserver: unrecognized option '--bogus-flag'\nUsage: tritonserver [options]\n"
    + "".join(f"  --option-{i} <string>\n\tWhat it does.\n" for i in range(60))
)


def test_a_refused_command_line_shows_its_reason_not_the_usage_tail(tmp_path):
    server = object.__new__(EmbeddedServer)
    server._log_path = tmp_path / "tritonserver.log"
    server.log_path.write_text(REFUSED)
    tail = server.log_tail()
    assert tail.splitlines()[0].endswith("unrecognized option '--bogus-flag'")
    assert "--option-59" not in tail and "usage text" in tail
    server.log_path.write_text("".join(f"line {i}\n" for i in range(100)))
    assert server.log_tail().splitlines() == [f"line {i}" for i in range(70, 100)]


def test_a_check_made_after_parsing_shows_its_reason_below_the_usage_text(tmp_path):
    """.ci/run at 2de55ad: 'tritonserver exited with code 1 while starting: (then tritonserver's usage
    text)' -- the reason, printed after the usage text, was left out."""
    server = object.__new__(EmbeddedServer)
    server._log_path = tmp_path / "tritonserver.log"
    reason = (
        "The server cannot listen to GRPC requests and metrics requests at the same address "
        "and port 127.0.0.1:41425"
    )
    server.log_path.write_text(REFUSED.split("\n", 1)[1] + "\n" + reason + "\n")
    assert server.log_tail().splitlines()[-2:] == ["(then tritonserver's usage text)", reason]


def test_free_ports_are_distinct_and_avoid_the_ports_given():
    """Picked one at a time and closed, the kernel handed the same port out twice (gRPC = metrics)."""
    for _ in range(200):
        first, *rest = free_ports(3)
        assert len({first, *rest}) == 3
        assert first not in free_ports(2, frozenset({first}))


class _NeverReaped:
    """A server process whose wait() never sees it go (one in uninterruptible sleep after SIGKILL,
    or writing a core dump): stands in front of a real process group, which the signals reach."""

    def __init__(self, proc):
        self.proc, self.pid, self.waits = proc, proc.pid, []

    def poll(self):
        return None

    def wait(self, timeout=None):
        self.waits.append(timeout)
        raise subprocess.TimeoutExpired("tritonserver", timeout)


def test_stop_never_waits_forever_for_a_killed_server(monkeypatch):
    """A clean clone's .ci/run at c51e0b7: `serve` had not exited 60 s after its SIGINT. stop() waited on
    the server with no limit once it had killed it; now it gives up KILL_WAIT_S later and names the pid."""
    import tritonbuild.server.embedded as embedded

    monkeypatch.setattr(embedded, "STOP_TIMEOUT_S", 0.1)
    monkeypatch.setattr(embedded, "KILL_WAIT_S", 0.1)
    # a server that ignores SIGINT (too slow to stop): only the SIGKILL ends it
    real = subprocess.Popen(
        ["bash", "-c", 'trap "" INT; echo ready; exec sleep 60'],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert real.stdout.readline() == "ready\n"
    try:
        server = object.__new__(EmbeddedServer)
        fake = _NeverReaped(real)
        server.proc, server.unreaped = fake, None
        server.launcher = types.SimpleNamespace(stopped=lambda ports: None)
        server.http_port = server.grpc_port = server.metrics_port = 0
        server.stop()
        assert server.proc is None and server.unreaped == real.pid
        assert fake.waits == [0.1, 0.1]  # SIGINT's wait, then SIGKILL's: each bounded
        assert real.wait(timeout=10) == -signal.SIGKILL  # the group was killed all the same
    finally:
        real.kill()
        real.wait()
