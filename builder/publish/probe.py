#!/usr/bin/env python3
"""Golden-inference probe of a serving tritonserver: one self-contained file (python3's standard
library, and numpy for the goldens, both in the stock NGC image for its Python backend: server
build.py, facts/kubernetes.json stock_image_python), shipped verbatim in the ConfigMap
deploy-snippets writes and COPYed into Dockerfile.triton. A server can report ready and still
answer wrongly (a bad engine, a mismatched library): for every READY version that has a golden, the
golden's first input is sent and the outputs must match it bit for bit.

--folder DIR, the Kubernetes readiness probe (expect.json and the goldens the ConfigMap mounts): may
this pod get traffic? Every model the deployment expects must have some version READY in the
server's repository index. A model or version still loading (a publish in progress, a new model) is
not waited for, so a publish reaching every polling pod at once never takes them all out of their
Service; a model the deployment does not expect (one a later publish added) never makes the pod
not-ready.

--repository DIR, the Docker HEALTHCHECK (a repository's tritonbuild-manifest.json and its goldens,
/models baked into the image): is this container serving its repository? Every model of the
manifest must have the manifest's version READY; a model still loading counts as not yet healthy. A
HEALTHCHECK gates no traffic (Kubernetes ignores it and runs --folder); it tells `depends_on:
condition: service_healthy`, a swarm or an operator whether the container does its job. Its models
load once at start (model-control mode none), which the HEALTHCHECK's start period covers, and
Docker turns a container unhealthy only after several failures in a row; a model not READY after
that never will be (mode none retries nothing), and must show.

This runs inside the serving image, where tritonclient is not installed: it speaks Triton's
HTTP/REST protocol with the standard library.

    python3 probe.py --folder /etc/tritonbuild --url http://127.0.0.1:8000 → exit 0 ready, 1 not
    python3 probe.py --repository /models --url http://127.0.0.1:8000 → exit 0 healthy, 1 not
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

EXPECT = "expect.json"
MANIFEST = "tritonbuild-manifest.json"
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


class Expected:
    """A model the server must serve: the version that must be READY (None: any), its goldens
    (version → .npz). A plain class: dataclasses imports inspect, which publish/inspect.py shadows
    when this file runs in place."""

    def __init__(self, name: str, version: int | None, goldens: dict[int, Path]):
        self.name, self.version, self.goldens = name, version, goldens


def from_folder(folder: Path) -> list[Expected]:
    """The models a deployment expects (expect.json, written by deploy-snippets): any version READY
    will do."""
    expect = json.loads((folder / EXPECT).read_text())
    return [
        Expected(
            model["name"],
            None,
            {int(version): folder / golden for version, golden in model.get("goldens", {}).items()},
        )
        for model in expect["models"]
    ]


def from_repository(repository: Path) -> list[Expected]:
    """The models of a repository's manifest: each at the manifest's version, its golden beside
    it."""
    manifest = json.loads((repository / MANIFEST).read_text())
    return [
        Expected(
            model["name"],
            int(model["version"]),
            {int(model["version"]): repository / model["goldens"]} if model.get("goldens") else {},
        )
        for model in manifest["models"]
    ]


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


def _same(answer: dict, expected) -> bool:
    """Bit for bit: the answer's bytes (or strings) are the golden's, in the golden's shape and
    dtype."""
    import numpy as np

    if expected.dtype == np.object_:
        data = [x.encode() if isinstance(x, str) else x for x in answer["data"]]
        return data == expected.reshape(-1).tolist()
    array = (
        np.array(answer["data"], dtype=np.float64).astype(expected.dtype).reshape(answer["shape"])
    )
    return array.shape == expected.shape and array.tobytes() == expected.tobytes()


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
        if key not in got:
            problems.append(f"{name} v{version}: output {key} missing")
        elif not _same(got[key], expected):
            problems.append(f"{name} v{version}: output {key} differs from its golden")
    return problems


def problems(expected: list[Expected], url: str, timeout: float) -> list[str]:
    """Every problem with what the server serves (an empty list: ready, or healthy)."""
    try:
        ready = ready_versions(url, timeout)
    except (urllib.error.URLError, OSError, ValueError) as e:
        return [f"the server does not answer its repository index: {e}"]
    found = []
    for model in expected:
        versions = ready.get(model.name, set())
        if model.version is None and not versions:
            found.append(f"{model.name}: no version READY")
            continue
        if model.version is not None and model.version not in versions:
            found.append(f"{model.name} v{model.version}: not READY")
            continue
        for version, golden in sorted(model.goldens.items()):
            if version in versions:
                found += golden_problems(url, model.name, version, golden, timeout)
    return found


def check(folder: Path, url: str, timeout: float) -> list:
    """Every problem that makes this pod not ready (--folder)."""
    return problems(from_folder(folder), url, timeout)


def check_repository(repository: Path, url: str, timeout: float) -> list:
    """Every problem that makes this container unhealthy (--repository)."""
    return problems(from_repository(repository), url, timeout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--folder", type=Path, help="expect.json and goldens (Kubernetes readiness)"
    )
    source.add_argument(
        "--repository", type=Path, help="a repository with its manifest (Docker HEALTHCHECK)"
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per request")
    args = parser.parse_args()
    url = args.url.rstrip("/")
    verdict = "not ready" if args.folder else "unhealthy"
    try:
        if args.folder:
            found = check(args.folder, url, args.timeout)
        else:
            found = check_repository(args.repository, url, args.timeout)
    except (OSError, ValueError, KeyError, TypeError) as e:
        found = [f"cannot check: {e}"]
    sys.stderr.writelines(f"{verdict}: {problem}\n" for problem in found)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
