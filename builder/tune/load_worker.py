"""A load generator worker process: tritonclient's asyncio gRPC client running a closed loop (N
requests in flight) or an open loop (a rate) over the samples, every answer compared byte for byte
with its golden; the parent (loadgen.py) drives it over a pipe."""

from __future__ import annotations

import asyncio
import contextlib
import time

import numpy as np

Sample = dict[str, np.ndarray]
# open loop: requests in flight per worker before sends are counted as dropped
MAX_OUTSTANDING = 4096


def run_worker(
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
            "detail": f"shape/dtype {got.dtype.str}{list(got.shape)} != "
            f"{exp.dtype.str}{list(exp.shape)}"
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
    """One worker process's load: closed or open loop over the samples, each answer compared with
    its golden."""

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
        # any failure of one request is counted, the load goes on
        except Exception as e:  # noqa: BLE001
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
