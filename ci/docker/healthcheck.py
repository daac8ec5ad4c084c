#!/usr/bin/env python3
"""Health check that infers: for every model in the repository's tritonbuild manifest that has goldens, send
its first golden input to the server and compare the outputs bit for bit; other models must report ready.

A server can report ready and still answer wrongly (a bad engine, a mismatched library): this catches that.
Used as the Docker HEALTHCHECK of Dockerfile.triton and as the Kubernetes readiness probe. Needs only numpy.

    healthcheck.py --repository /models --url http://127.0.0.1:8000   → exit 0 healthy, 1 not
"""

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

TRITON_TYPES = {
    "bool": "BOOL",
    "uint8": "UINT8",
    "uint16": "UINT16",
    "uint32": "UINT32",
    "uint64": "UINT64",
    "int8": "INT8",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "float16": "FP16",
    "float32": "FP32",
    "float64": "FP64",
    "object": "BYTES",
}


def _post(url: str, body: dict, timeout: float) -> dict:
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def _ready(url: str, model: str, version: int, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(
            f"{url}/v2/models/{model}/versions/{version}/ready", timeout=timeout
        ) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _tensor(name: str, arr: np.ndarray) -> dict:
    data = [x.decode() if isinstance(x, bytes) else x for x in arr.reshape(-1).tolist()]
    return {
        "name": name,
        "shape": list(arr.shape),
        "datatype": TRITON_TYPES[str(arr.dtype)],
        "data": data,
    }


def check(repository: Path, url: str, timeout: float) -> list[str]:
    manifest = json.loads((repository / "tritonbuild-manifest.json").read_text())
    problems = []
    for m in manifest["models"]:
        name, version = m["name"], m["version"]
        if not _ready(url, name, version, timeout):
            problems.append(f"{name} v{version}: not ready")
            continue
        if not m.get("goldens"):
            continue
        with np.load(repository / m["goldens"], allow_pickle=False) as z:
            inputs = {k.split(".", 2)[2]: z[k] for k in z.files if k.startswith("input.0.")}
            outputs = {k.split(".", 2)[2]: z[k] for k in z.files if k.startswith("output.0.")}
        try:
            reply = _post(
                f"{url}/v2/models/{name}/versions/{version}/infer",
                {
                    "inputs": [_tensor(k, v) for k, v in inputs.items()],
                    "outputs": [{"name": k} for k in outputs],
                },
                timeout,
            )
        except (urllib.error.URLError, OSError, ValueError) as e:
            problems.append(f"{name} v{version}: inference failed: {e}")
            continue
        got = {o["name"]: o for o in reply.get("outputs", [])}
        for key, expected in outputs.items():
            o = got.get(key)
            if o is None:
                problems.append(f"{name}: output {key} missing")
                continue
            if expected.dtype == np.object_:
                same = [
                    x.encode() if isinstance(x, str) else x for x in o["data"]
                ] == expected.reshape(-1).tolist()
            else:
                arr = (
                    np.array(o["data"], dtype=np.float64).astype(expected.dtype).reshape(o["shape"])
                )
                same = arr.shape == expected.shape and arr.tobytes() == expected.tobytes()
            if not same:
                problems.append(f"{name}: output {key} differs from its golden")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repository", type=Path, default=Path("/models"))
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--timeout", type=float, default=10.0)
    args = ap.parse_args()
    try:
        problems = check(args.repository, args.url.rstrip("/"), args.timeout)
    except (OSError, ValueError, KeyError) as e:
        problems = [f"cannot check: {e}"]
    for p in problems:
        print(f"unhealthy: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
