"""Loopback ports for the embedded tritonserver: free ones picked, given ones checked.

Picked ports lie outside the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), where every
outgoing connection takes its local port: a port found free there can be taken by any client socket (the server's
own S3 reads, a test's requests) in the seconds before tritonserver binds it, which loads its startup models first.
A server of a fleet reading s3:// failed to start its metrics service so (.ci/run at c1bd206). Whatever still
takes a picked port in between (another process picking at the same moment) shows in the server's log, and start
picks again (server/embedded.py)."""

from __future__ import annotations

import contextlib
import random
import re
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10000  # below: the well-known services' and common dev servers' ports (Triton's 8000-8002 among them)
# tritonserver's main.cc when a port is in use: "failed to start HTTP service: Unavailable - Socket '...' already in
# use" (GRPC and Metrics the same; tritonserver 2.51.0's log)
_PORT_IN_USE = re.compile(r"failed to start (\w+) service: .*already in use")


def free_port() -> int:
    return free_ports(1)[0]


def outside_ephemeral() -> list[int]:
    """The ports from LOWEST up that no outgoing connection is given; empty where the range is unknown or leaves
    fewer than 1,000 of them (then the kernel picks, as for any socket)."""
    try:
        low, high = map(int, EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return []
    ports = [*range(LOWEST, min(low, 65536)), *range(max(high + 1, LOWEST), 65536)]
    return ports if len(ports) >= 1000 else []


def free_ports(count: int, avoid: frozenset[int] = frozenset()) -> list[int]:
    """count distinct free loopback ports, none of avoid, outside the ephemeral range where it can be read: every
    socket stays bound until all are picked (picked one at a time and closed, the kernel handed the same port out
    twice: a server given one port for gRPC and metrics refused to start, seen in .ci/run at 2de55ad)."""
    candidates = outside_ephemeral()
    random.shuffle(candidates)  # concurrent pickers (parallel verifies, test workers) start apart
    with contextlib.ExitStack() as held:
        picked: list[int] = []
        while len(picked) < count:
            sock = held.enter_context(socket.socket())
            wanted = candidates.pop() if candidates else 0
            try:
                sock.bind(("127.0.0.1", wanted))
            except OSError:
                if not wanted:
                    raise
                continue  # in use (a listener, a connection, a closed one waiting out TIME_WAIT)
            port = sock.getsockname()[1]
            if port not in avoid and port not in picked:
                picked.append(port)
        return picked


def lost_port(log: str) -> str | None:
    """The service ('HTTP', 'GRPC', 'Metrics') whose port tritonserver found in use as it started, per its log."""
    found = _PORT_IN_USE.search(log)
    return found.group(1) if found else None


def taken_ports(ports: tuple[int, ...]) -> list[int]:
    """The given ports (0: pick one, skipped) another process already listens on at the loopback address:
    tritonserver would fail to bind them, and a health probe there would answer for the other server."""
    taken = []
    for port in ports:
        if not port:
            continue
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                taken.append(port)
    return taken
