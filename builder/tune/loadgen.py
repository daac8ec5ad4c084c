"""Load generator: tritonclient's asyncio gRPC client in several worker processes.

Closed loop (N concurrent requests, each sent as soon as the previous one answered) or open loop (a request
rate, sent on schedule whatever the server does). Every answer to a golden input is compared byte for byte
with the golden output, so "bit-exact under load" is measured, not assumed.

A measurement is a series of windows; it ends when `stable_windows` consecutive windows agree within
`stability` on throughput and p99 (perf_analyzer's rule), or after `max_windows` (then reported unstable).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import time
from dataclasses import dataclass, field

import numpy as np

Sample = dict[str, np.ndarray]
MAX_OUTSTANDING = (
    4096  # open loop: requests in flight per worker before sends are counted as dropped
)


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


# ---------------------------------------------------------------- worker process


def _worker(
    conn,
    url: str,
    model: str,
    samples: list[Sample],
    expected: list[Sample] | None,
    outputs: list[str],
) -> None:
    with contextlib.suppress(KeyboardInterrupt, EOFError, BrokenPipeError):
        asyncio.run(_worker_main(conn, url, model, samples, expected, outputs))


def _first_diff(exp: np.ndarray, got: np.ndarray) -> dict:
    if exp.shape != got.shape or exp.dtype != got.dtype:
        return {
            "detail": f"shape/dtype {got.dtype.str}{list(got.shape)} != {exp.dtype.str}{list(exp.shape)}"
        }
    a = np.ascontiguousarray(exp).view(np.uint8).reshape((*exp.shape, -1))
    b = np.ascontiguousarray(got).view(np.uint8).reshape((*got.shape, -1))
    diff = (a != b).any(axis=-1)
    out = {
        "differing": int(diff.sum()),
        "total": int(diff.size),
        "first_index": [int(i) for i in np.argwhere(diff)[0]],
    }
    if exp.dtype != np.object_:
        out["max_abs_diff"] = float(np.max(np.abs(exp.astype(np.float64) - got.astype(np.float64))))
    return out


async def _worker_main(conn, url, model, samples, expected, outputs) -> None:
    import tritonclient.grpc.aio as grpcclient

    client = grpcclient.InferenceServerClient(url)
    try:
        await _Worker(client, grpcclient, model, samples, expected, outputs).serve(conn)
    finally:
        await client.close()


class _Worker:
    """One worker process's load: closed or open loop over the samples, each answer compared with its golden."""

    def __init__(self, client, grpcclient, model: str, samples, expected, outputs):
        from tritonclient.utils import np_to_triton_dtype

        self.client, self.model = client, model
        self.prepared = []
        for s in samples:
            ins = []
            for name, arr in s.items():
                i = grpcclient.InferInput(name, list(arr.shape), np_to_triton_dtype(arr.dtype))
                i.set_data_from_numpy(arr)
                ins.append(i)
            self.prepared.append(ins)
        self.want = [grpcclient.InferRequestedOutput(o) for o in outputs]
        self.expect(expected)
        self.state = {"lat": [], "errors": 0, "mm": 0, "first_mm": None, "first_err": None}
        self.stop = asyncio.Event()
        self.counter = 0

    def expect(self, expected) -> None:
        self.expected = expected
        self.exp_bytes = (
            None if expected is None else [{k: v.tobytes() for k, v in e.items()} for e in expected]
        )

    async def one(self, t_sched: float | None = None) -> None:
        state = self.state
        i = self.counter % len(self.prepared)
        self.counter += 1
        t0 = time.perf_counter()
        try:
            res = await self.client.infer(
                self.model, self.prepared[i], outputs=self.want, client_timeout=120
            )
        except Exception as e:  # noqa: BLE001 - any failure of one request is counted, the load goes on
            state["errors"] += 1
            state["first_err"] = state["first_err"] or f"{type(e).__name__}: {e}"[:500]
            return
        t1 = time.perf_counter()
        state["lat"].append((t1 - (t_sched if t_sched is not None else t0)) * 1000.0)
        if self.exp_bytes is None:
            return
        for name, eb in self.exp_bytes[i].items():
            got = res.as_numpy(name)
            if got is None or got.tobytes() != eb:
                state["mm"] += 1
                if state["first_mm"] is None:
                    d = (
                        _first_diff(self.expected[i][name], got)
                        if got is not None
                        else {"detail": "missing"}
                    )
                    state["first_mm"] = {"sample": i, "output": name, **d}
                break

    async def closed(self, n: int) -> None:
        async def user() -> None:
            while not self.stop.is_set():
                await self.one()

        await asyncio.gather(*(user() for _ in range(n)))

    async def opened(self, rate: float) -> None:
        pending: set[asyncio.Task] = set()
        t_next = time.perf_counter()
        while not self.stop.is_set():
            now = time.perf_counter()
            if now < t_next:
                await asyncio.sleep(t_next - now)
                continue
            if len(pending) < MAX_OUTSTANDING:
                task = asyncio.ensure_future(self.one(t_next))
                pending.add(task)
                task.add_done_callback(pending.discard)
            else:
                self.state["errors"] += 1
                self.state["first_err"] = (
                    self.state["first_err"] or "client: too many requests in flight (open loop)"
                )
            t_next += 1.0 / rate
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    def take(self) -> dict:
        state = self.state
        out = {
            "lat": state["lat"],
            "errors": state["errors"],
            "mm": state["mm"],
            "first_mm": state["first_mm"],
            "first_err": state["first_err"],
            "t": time.perf_counter(),
        }
        state.update(lat=[], errors=0, mm=0, first_mm=None, first_err=None)
        return out

    async def serve(self, conn) -> None:
        """The parent's commands: run a load, flush a window, halt, stop."""
        loop = asyncio.get_running_loop()
        running: list[asyncio.Future] = []
        conn.send({"ready": True})
        while True:
            cmd = await loop.run_in_executor(None, conn.recv)
            op = cmd["op"]
            if op == "run":
                self.model = cmd.get(
                    "model", self.model
                )  # the name the config under test is loaded as
                self.stop.clear()
                self.take()
                coro = (
                    self.closed(cmd["concurrency"])
                    if cmd.get("concurrency")
                    else self.opened(cmd["rate"])
                )
                running = [asyncio.ensure_future(coro)]
                conn.send({"t": time.perf_counter()})
            elif (
                op == "expect"
            ):  # the answers to compare with from now on (another config's own answers)
                self.expect(cmd["expected"])
                conn.send({"ok": True})
            elif op == "flush":
                conn.send(self.take())
            elif op == "halt":
                self.stop.set()
                if running:
                    await asyncio.gather(*running, return_exceptions=True)
                running = []
                conn.send(self.take())
            elif op == "stop":
                break


# ---------------------------------------------------------------- parent side


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
                target=_worker, args=(child, url, model, samples, expected, outputs), daemon=True
            )
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)
        for conn in self.conns:
            if not conn.poll(120):
                raise RuntimeError("load generator worker did not start within 120 s")
            conn.recv()

    def expect(self, expected: list[Sample] | None) -> None:
        """Compare every answer with these from now on (tune.determinism: invariant: the config's own)."""
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
        for conn in active:  # discard the warm-up
            conn.send({"op": "flush"})
        last = max(conn.recv()["t"] for conn in active)
        windows: list[Window] = []
        stable = False
        while len(windows) < max_windows:
            time.sleep(window_s)
            for conn in active:
                conn.send({"op": "flush"})
            parts = [conn.recv() for conn in active]
            now = max(part["t"] for part in parts)
            window = Window(
                seconds=now - last,
                count=sum(len(part["lat"]) for part in parts),
                errors=sum(part["errors"] for part in parts),
                latencies_ms=[x for part in parts for x in part["lat"]],
                mismatches=sum(part["mm"] for part in parts),
                first_mismatch=next((part["first_mm"] for part in parts if part["first_mm"]), None),
                first_error=next((part["first_err"] for part in parts if part["first_err"]), None),
            )
            last = now
            windows.append(window)
            if len(windows) >= stable_windows and is_stable(windows[-stable_windows:], stability):
                stable = True
                break
        for conn in active:
            conn.send({"op": "halt"})
        for conn in active:
            conn.recv()
        used = windows[-stable_windows:]
        lat = [x for window in used for x in window.latencies_ms]
        secs = sum(window.seconds for window in used)
        pct = (lambda q: float(np.percentile(lat, q))) if lat else (lambda q: float("inf"))
        return Result(
            load=f"c{concurrency}" if concurrency else f"r{rate:g}",
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
            first_error=next(
                (window.first_error for window in windows if window.first_error), None
            ),
            window_throughputs=[round(window.throughput, 2) for window in windows],
            offered_rate=rate,
        )

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


def is_stable(windows: list[Window], stability: float) -> bool:
    """perf_analyzer's rule: throughput and p99 of each window within ±stability of their mean."""
    if any(w.count == 0 for w in windows):
        return False
    for values in ([w.throughput for w in windows], [w.p(99) for w in windows]):
        mean = sum(values) / len(values)
        if mean <= 0 or any(abs(v - mean) > stability * mean for v in values):
            return False
    return True
