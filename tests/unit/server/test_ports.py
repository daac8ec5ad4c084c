"""Which loopback ports the embedded server is given, and what its log says when one was taken."""

from __future__ import annotations

import socket

from tritonbuild.server import ports
from tritonbuild.server.ports import free_ports, lost_port, outside_ephemeral

# tritonserver 2.51.0's log when its HTTP port was taken between the pick and its bind (run by hand, 2026-12-08)
LOST_HTTP = (
    'I1208 01:09:02.620963 2436 http_server.cc:4713] "Started HTTPService at 127.0.0.1:34573"\n'
    'E1208 01:09:02.664921 2436 main.cc:257] "failed to start HTTP service: Unavailable - Socket '
    "'127.0.0.1:34573' already in use \"\n"
)


def test_picked_ports_lie_outside_the_range_outgoing_connections_take_theirs():
    """.ci/run at c1bd206: a fleet server reading s3:// failed to start its metrics service; its port, picked by
    the kernel from the ephemeral range, was taken by a client socket before the server bound it."""
    low, high = map(int, ports.EPHEMERAL_RANGE.read_text().split())
    picked = [port for _ in range(50) for port in free_ports(3)]
    assert all(port < low or port > high for port in picked), (low, high, picked)
    assert all(port >= ports.LOWEST for port in picked)


def test_a_candidate_in_use_is_passed_over(monkeypatch):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        with socket.socket() as spare:
            spare.bind(("127.0.0.1", 0))
            free = spare.getsockname()[1]
        # popped from the end: taken first
        monkeypatch.setattr(ports, "outside_ephemeral", lambda: [free, taken])
        assert free_ports(1) == [free]


def test_an_ephemeral_range_that_leaves_too_few_ports_lets_the_kernel_pick(tmp_path, monkeypatch):
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", tmp_path / "range")
    assert outside_ephemeral() == []  # unreadable
    ports.EPHEMERAL_RANGE.write_text("1024\t65000\n")
    assert outside_ephemeral() == []  # 535 left
    ports.EPHEMERAL_RANGE.write_text("32768\t60999\n")
    assert outside_ephemeral() == [*range(10000, 32768), *range(61000, 65536)]
    assert len(set(free_ports(4))) == 4


def test_the_service_whose_port_was_taken_is_read_from_the_log():
    assert lost_port(LOST_HTTP) == "HTTP"
    assert lost_port(LOST_HTTP.replace("HTTP service", "Metrics service")) == "Metrics"
    assert lost_port('E main.cc:257] "failed to start GRPC service: Unavailable - unknown"') is None
    assert lost_port(LOST_HTTP.split("\n")[0]) is None
