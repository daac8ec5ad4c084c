"""Load on the two-GPU run's gpu-scorer (benchmarks/multi_gpu/README.md), stdlib + numpy, Triton's HTTP API:

    scorer_load.py URL MODEL [SECONDS [STREAMS]]

Each of ROWS seeded feature rows is first sent alone, one request at a time: its answer is the reference. Then
STREAMS threads send, for SECONDS, requests of 1 to 4 rows drawn from the same set (so the dynamic batcher mixes
them with the others' rows, on any of the instances); every row's answer is compared with its reference bit for
bit. Prints one JSON object: requests, rows, differing rows, the first difference seen.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np

ROWS, FEATURES, SEED = 64, 256, 0


def infer(url: str, model: str, x: np.ndarray) -> np.ndarray:
    body = {
        "inputs": [
            {"name": "X", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}
        ],
        "outputs": [{"name": "Y"}],
    }
    req = urllib.request.Request(
        f"{url}/v2/models/{model}/infer",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=120) as response:
        out = json.loads(response.read())["outputs"][0]
    return np.asarray(out["data"], dtype=np.float32).reshape(out["shape"])


def load(url: str, model: str, seconds: float = 120, streams: int = 64) -> dict:
    seconds, streams = float(seconds), int(streams)
    rows = np.random.default_rng(SEED).standard_normal((ROWS, FEATURES)).astype(np.float32)
    reference = [infer(url, model, rows[i : i + 1])[0] for i in range(ROWS)]
    lock = threading.Lock()
    tally = {"requests": 0, "rows": 0, "differing_rows": 0, "first_difference": None}
    deadline = time.monotonic() + seconds

    def stream(index: int) -> None:
        pick = random.Random(index)
        while time.monotonic() < deadline:
            chosen = [pick.randrange(ROWS) for _ in range(pick.randint(1, 4))]
            answer = infer(url, model, rows[chosen])
            bad = [
                i
                for i, row in zip(chosen, answer, strict=True)
                if row.tobytes() != reference[i].tobytes()
            ]
            with lock:
                tally["requests"] += 1
                tally["rows"] += len(chosen)
                tally["differing_rows"] += len(bad)
                if bad and tally["first_difference"] is None:
                    row = answer[chosen.index(bad[0])]
                    tally["first_difference"] = {
                        "row": bad[0],
                        "max_abs": float(np.abs(row - reference[bad[0]]).max()),
                    }

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=streams) as pool:
        for future in [pool.submit(stream, i) for i in range(streams)]:
            future.result()
    return {
        "model": model,
        "seconds": round(time.monotonic() - t0, 1),
        "streams": streams,
        "reference_rows": ROWS,
        **tally,
    }


if __name__ == "__main__":
    print(json.dumps(load(*sys.argv[1:])))
