#!/usr/bin/env python3
"""Readiness probe for the stock NGC tritonserver image, shipped verbatim in the ConfigMap that deploy-snippets
writes: it needs only the image's python3 and numpy (the image installs both for its Python backend: server
build.py, facts/kubernetes.json stock_image_python) and the files mounted beside it.

Ready when the server answers and every model the deployment expects has a version READY in the
server's repository index; for each READY version that has a golden here, its first golden input is
sent and the outputs must match bit for bit. A model or version still loading (a publish in
progress, a new model) is not waited for, so a publish never takes a serving pod out of its Service;
a model the deployment does not expect (one a later publish added) never makes the pod not-ready.

This runs inside the serving image, where tritonclient is not installed: it speaks Triton's
HTTP/REST protocol with the standard library.

    python3 k8s_probe.py --folder /etc/tritonbuild --url http://127.0.0.1:8000 → exit 0 ready, 1 not
"""

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

EXPECT = "expect.json"
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


def _post(url: str, body: dict, timeout: float):
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read() or b"null")


def ready_versions(url: str, timeout: float) -> dict:
    """Model name → the versions the server's repository index reports READY."""
    out = {}
    for entry in _post(f"{url}/v2/repository/index", {}, timeout) or []:
        if entry.get("state") == "READY" and str(entry.get("version", "")).isdigit():
            out.setdefault(entry["name"], set()).add(int(entry["version"]))
    return out


def _tensor(name: str, array) -> dict:
    data = [x.decode() if isinstance(x, bytes) else x for x in array.reshape(-1).tolist()]
    return {
        "name": name,
        "shape": list(array.shape),
        "datatype": TRITON_TYPES[str(array.dtype)],
        "data": data,
    }


def golden_problems(url: str, name: str, version: int, golden: Path, timeout: float) -> list:
    """What differs between the server's answer for golden's first input and golden's first
    output."""
    import numpy as np

    with np.load(golden, allow_pickle=False) as arrays:
        inputs = {
            key.split(".", 2)[2]: arrays[key] for key in arrays.files if key.startswith("input.0.")
        }
        outputs = {
            key.split(".", 2)[2]: arrays[key] for key in arrays.files if key.startswith("output.0.")
        }
    try:
        reply = _post(
            f"{url}/v2/models/{name}/versions/{version}/infer",
            {
                "inputs": [_tensor(key, value) for key, value in inputs.items()],
                "outputs": [{"name": key} for key in outputs],
            },
            timeout,
        )
    except (urllib.error.URLError, OSError, ValueError) as e:
        return [f"{name} v{version}: golden inference failed: {e}"]
    got = {output["name"]: output for output in reply.get("outputs", [])}
    problems = []
    for key, expected in outputs.items():
        answer = got.get(key)
        if answer is None:
            problems.append(f"{name} v{version}: output {key} missing")
            continue
        if expected.dtype == np.object_:
            same = [
                x.encode() if isinstance(x, str) else x for x in answer["data"]
            ] == expected.reshape(-1).tolist()
        else:
            array = (
                np.array(answer["data"], dtype=np.float64)
                .astype(expected.dtype)
                .reshape(answer["shape"])
            )
            same = array.shape == expected.shape and array.tobytes() == expected.tobytes()
        if not same:
            problems.append(f"{name} v{version}: output {key} differs from its golden")
    return problems


def check(folder: Path, url: str, timeout: float) -> list:
    """Every problem that makes this server not ready (an empty list: ready)."""
    expect = json.loads((folder / EXPECT).read_text())
    try:
        ready = ready_versions(url, timeout)
    except (urllib.error.URLError, OSError, ValueError) as e:
        return [f"the server does not answer its repository index: {e}"]
    problems = []
    for model in expect["models"]:
        name = model["name"]
        versions = ready.get(name)
        if not versions:
            problems.append(f"{name}: no version READY")
            continue
        for version, golden in sorted(model.get("goldens", {}).items()):
            if int(version) in versions:
                problems += golden_problems(url, name, int(version), folder / golden, timeout)
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=Path("/etc/tritonbuild"))
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()
    try:
        problems = check(args.folder, args.url.rstrip("/"), args.timeout)
    except (OSError, ValueError, KeyError) as e:
        problems = [f"cannot check: {e}"]
    sys.stderr.writelines(f"not ready: {problem}\n" for problem in problems)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
