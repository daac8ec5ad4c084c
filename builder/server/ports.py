"""Loopback ports for the embedded tritonserver: free ones picked, given ones checked."""

from __future__ import annotations

import contextlib
import socket


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int, avoid: frozenset[int] = frozenset()) -> list[int]:
    """count distinct free loopback ports, none of avoid: every socket stays bound until all are
    picked (picked one at a time and closed, the kernel handed the same port out twice: a server
    given one port for gRPC and metrics refused to start, seen in .ci/run at 2de55ad)."""
    with contextlib.ExitStack() as held:
        picked: list[int] = []
        while len(picked) < count:
            sock = held.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            if port not in avoid and port not in picked:
                picked.append(port)
        return picked


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
