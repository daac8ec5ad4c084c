"""Load generator: tritonclient's asyncio gRPC client in several worker processes.

Closed loop (N concurrent requests, each sent as soon as the previous one answered) or open loop (a
request rate, sent on schedule whatever the server does). Every answer to a golden input is compared
byte for byte with the golden output, so "bit-exact under load" is measured, not assumed.

A measurement is a series of windows; it ends when `stable_windows` consecutive windows agree within
`stability` on throughput and p99 (perf_analyzer's rule), or after `max_windows` (then reported
unstable).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import time
from dataclasses import dataclass, field

import numpy as np

from tritonbuild.tune.load_worker import Sample, run_worker


@dataclass
class Window:
    seconds: float
    count: int
    errors: int
    latencies_ms: list[float]
    mismatches: int
    first_mismatch: dict | None = None
    first_error: str | None = None

    @property
    def throughput(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else 0.0

    def p(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q)) if self.latencies_ms else float("inf")


@dataclass
class Result:
    load: str
    throughput: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    requests: int
    errors: int
    mismatches: int
    stable: bool
    windows: int
    seconds: float
    first_mismatch: dict | None = None
    first_error: str | None = None
    window_throughputs: list[float] = field(default_factory=list)
    offered_rate: float | None = None

    def to_dict(self) -> dict:
        return {
            k: (round(v, 4) if isinstance(v, float) and np.isfinite(v) else v)
            for k, v in self.__dict__.items()
        }


class LoadGenerator:
    """Worker processes with a gRPC client each; `measure()` one load level at a time."""

    def __init__(
        self,
        url: str,
        model: str,
        samples: list[Sample],
        expected: list[Sample] | None,
        outputs: list[str],
        *,
        processes: int = 2,
    ):
        self.url, self.model, self.processes = url, model, max(1, processes)
        ctx = mp.get_context("spawn")  # NOTE: never fork a process that may hold gRPC state
        self.conns, self.procs = [], []
        for _ in range(self.processes):
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=run_worker, args=(child, url, model, samples, expected, outputs), daemon=True
            )
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)
        for conn in self.conns:
            if not conn.poll(120):
                raise RuntimeError("load generator worker did not start within 120 s")
            conn.recv()

    def expect(self, expected: list[Sample] | None) -> None:
        """Compare every answer with these from now on (tune.determinism: invariant: the config's
        own)."""
        for conn in self.conns:
            conn.send({"op": "expect", "expected": expected})
        for conn in self.conns:
            conn.recv()

    def _split(self, total: float, integer: bool) -> list[float]:
        n = min(self.processes, int(total)) if integer else self.processes
        n = max(1, n)
        if integer:
            base, extra = divmod(int(total), n)
            return [base + (1 if i < extra else 0) for i in range(n)]
        return [total / n] * n

    def measure(
        self,
        *,
        concurrency: int | None = None,
        rate: float | None = None,
        window_s: float = 1.0,
        stable_windows: int = 3,
        stability: float = 0.10,
        max_windows: int = 10,
        warmup_s: float | None = None,
        model: str | None = None,
    ) -> Result:
        shares = self._split(concurrency, True) if concurrency else self._split(rate, False)
        active = self.conns[: len(shares)]
        for conn, share in zip(active, shares, strict=False):
            load = {"concurrency": share} if concurrency else {"rate": share}
            conn.send({"op": "run", "model": model or self.model, **load})
        for conn in active:
            conn.recv()
        time.sleep(window_s / 2 if warmup_s is None else warmup_s)
        last = max(part["t"] for part in _flush(active))  # discard the warm-up
        windows: list[Window] = []
        stable = False
        while len(windows) < max_windows:
            time.sleep(window_s)
            parts = _flush(active)
            now = max(part["t"] for part in parts)
            windows.append(_window(parts, now - last))
            last = now
            if len(windows) >= stable_windows and is_stable(windows[-stable_windows:], stability):
                stable = True
                break
        for conn in active:
            conn.send({"op": "halt"})
        for conn in active:
            conn.recv()
        load = f"c{concurrency}" if concurrency else f"r{rate:g}"
        return _result(load, windows, windows[-stable_windows:], stable, rate)

    def close(self) -> None:
        for conn in self.conns:
            with contextlib.suppress(BrokenPipeError, OSError):
                conn.send({"op": "stop"})
        for proc in self.procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self.conns, self.procs = [], []

    def __enter__(self) -> LoadGenerator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _flush(active) -> list[dict]:
    """Each worker's answers since its last flush."""
    for conn in active:
        conn.send({"op": "flush"})
    return [conn.recv() for conn in active]


def _window(parts: list[dict], seconds: float) -> Window:
    return Window(
        seconds=seconds,
        count=sum(len(part["lat"]) for part in parts),
        errors=sum(part["errors"] for part in parts),
        latencies_ms=[x for part in parts for x in part["lat"]],
        mismatches=sum(part["mm"] for part in parts),
        first_mismatch=next((part["first_mm"] for part in parts if part["first_mm"]), None),
        first_error=next((part["first_err"] for part in parts if part["first_err"]), None),
    )


def _result(
    load: str, windows: list[Window], used: list[Window], stable: bool, rate: float | None
) -> Result:
    """Throughput and percentiles over the used (last, stable) windows; counts over all."""
    lat = [x for window in used for x in window.latencies_ms]
    secs = sum(window.seconds for window in used)
    pct = (lambda q: float(np.percentile(lat, q))) if lat else (lambda q: float("inf"))
    return Result(
        load=load,
        throughput=sum(window.count for window in used) / secs if secs else 0.0,
        p50_ms=pct(50),
        p95_ms=pct(95),
        p99_ms=pct(99),
        requests=sum(window.count for window in windows),
        errors=sum(window.errors for window in windows),
        mismatches=sum(window.mismatches for window in windows),
        stable=stable,
        windows=len(windows),
        seconds=round(sum(window.seconds for window in windows), 3),
        first_mismatch=next(
            (window.first_mismatch for window in windows if window.first_mismatch), None
        ),
        first_error=next((window.first_error for window in windows if window.first_error), None),
        window_throughputs=[round(window.throughput, 2) for window in windows],
        offered_rate=rate,
    )


def is_stable(windows: list[Window], stability: float) -> bool:
    """perf_analyzer's rule: throughput and p99 of each window within ±stability of their mean."""
    if any(w.count == 0 for w in windows):
        return False
    for values in ([w.throughput for w in windows], [w.p(99) for w in windows]):
        mean = sum(values) / len(values)
        if mean <= 0 or any(abs(v - mean) > stability * mean for v in values):
            return False
    return True
