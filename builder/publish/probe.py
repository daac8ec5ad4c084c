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
HTTP/REST protocol with the standard library, every golden tensor in the binary data extension both
ways (an INT64 above 2**53 or a BYTES element that is not UTF-8 has no exact JSON form).

    python3 probe.py --folder /etc/tritonbuild --url http://127.0.0.1:8000 → exit 0 ready, 1 not
    python3 probe.py --repository /models --url http://127.0.0.1:8000 → exit 0 healthy, 1 not
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

EXPECT = "expect.json"
MANIFEST = "tritonbuild-manifest.json"
TRITON_TYPES = {  # numpy dtype name → Triton datatype
    **{name: name.upper() for name in ("bool", "int8", "int16", "int32", "int64")},
    **{name: name.upper() for name in ("uint8", "uint16", "uint32", "uint64")},
    **{"float16": "FP16", "float32": "FP32", "float64": "FP64", "object": "BYTES"},
}


class Expected:
    """A model the server must serve: the version that must be READY (None: any), its goldens
    (version → .npz)."""

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
    it. A publish target synced there (TRITONBUILD_TARGET: its manifest maps each model to its
    versions): each model's live version, its golden inside the version folder, or beside it where
    an earlier tritonbuild published it."""
    manifest = json.loads((repository / MANIFEST).read_text())
    if isinstance(manifest["models"], dict):
        return [
            _live(repository, name, state)
            for name, state in sorted(manifest["models"].items())
            if state.get("live") is not None
        ]
    return [
        Expected(
            model["name"],
            int(model["version"]),
            {int(model["version"]): repository / model["goldens"]} if model.get("goldens") else {},
        )
        for model in manifest["models"]
    ]


def _live(repository: Path, name: str, state: dict) -> Expected:
    live = int(state["live"])
    files = state["versions"][str(live)].get("files") or {}
    places = (f"{live}/golden-v{live}.npz", f"golden-v{live}.npz")
    golden = next((rel for rel in places if rel in files), None)
    return Expected(name, live, {live: repository / name / golden} if golden else {})


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


# A golden's BYTES tensor, as tritonbuild's core/npz.py stores it without pickling: a structured
# array of (nbytes, data), data zero-padded to the longest element.
BYTES_FIELDS = ("nbytes", "data")
HEADER_LENGTH = "Inference-Header-Content-Length"


def _golden_array(array):
    """The golden's array as Triton sends it: a BYTES tensor back to an object array of bytes.
    core/npz.py's _decode_bytes read in a file that ships alone (no tritonbuild import here);
    tests/integration/test_probe_exact.py writes goldens with core/npz and holds the two together."""
    import numpy as np

    if array.dtype.names != BYTES_FIELDS:
        return array
    flat = array.reshape(-1)
    width = array.dtype[BYTES_FIELDS[1]].itemsize
    data = np.ascontiguousarray(flat[BYTES_FIELDS[1]]).view(np.uint8).reshape(len(flat), width)
    items = [data[i, : int(n)].tobytes() for i, n in enumerate(flat[BYTES_FIELDS[0]])]
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out.reshape(array.shape)


def _raw(array) -> bytes:
    """A tensor's bytes in Triton's binary data extension: little-endian, row-major; a BYTES
    element as its 4-byte little-endian length, then its bytes."""
    if array.dtype == object:
        items = [x if isinstance(x, bytes) else str(x).encode() for x in array.reshape(-1)]
        return b"".join(len(item).to_bytes(4, "little") + item for item in items)
    return array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes(order="C")


def _infer(url: str, inputs: dict, outputs: list, timeout: float) -> dict:
    """One inference, every tensor as binary data both ways (no JSON number or text conversion):
    output name → (datatype, shape, bytes)."""
    raws = {name: _raw(array) for name, array in inputs.items()}
    header = {
        "inputs": [
            {
                "name": name,
                "shape": list(array.shape),
                "datatype": TRITON_TYPES[str(array.dtype)],
                "parameters": {"binary_data_size": len(raws[name])},
            }
            for name, array in inputs.items()
        ],
        "outputs": [{"name": name, "parameters": {"binary_data": True}} for name in outputs],
    }
    head = json.dumps(header).encode()
    request = urllib.request.Request(
        url,
        data=head + b"".join(raws.values()),
        method="POST",
        headers={"Content-Type": "application/octet-stream", HEADER_LENGTH: str(len(head))},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = response.read()
        length = int(response.headers.get(HEADER_LENGTH) or len(body))
    answer, offset, out = json.loads(body[:length]), length, {}
    for output in answer.get("outputs", []):
        size = int(output.get("parameters", {}).get("binary_data_size", 0))
        out[output["name"]] = (output["datatype"], output["shape"], body[offset : offset + size])
        offset += size
    return out


def _same(answer: tuple, expected) -> bool:
    """Bit for bit: the answer's datatype, shape and bytes are the golden's."""
    datatype, shape, data = answer
    return (
        datatype == TRITON_TYPES[str(expected.dtype)]
        and list(shape) == list(expected.shape)
        and data == _raw(expected)
    )


def _classes(arrays) -> list[tuple[dict | None, dict]]:
    """The golden's machine classes (tritonbuild's verify/goldens.py layout, read here without
    it): (fingerprint or None, the first sample's outputs), the file's plain members first."""
    found = [
        (
            json.loads(arrays["numerics"].tobytes()) if "numerics" in arrays.files else None,
            {
                key.split(".", 2)[2]: _golden_array(arrays[key])
                for key in arrays.files
                if key.startswith("output.0.")
            },
        )
    ]
    k = 1
    while f"class.{k}.numerics" in arrays.files:
        prefix = f"class.{k}.output.0."
        found.append(
            (
                json.loads(arrays[f"class.{k}.numerics"].tobytes()),
                {
                    key[len(prefix) :]: _golden_array(arrays[key])
                    for key in arrays.files
                    if key.startswith(prefix)
                },
            )
        )
        k += 1
    return found


def _cpu() -> dict:
    """This machine's CPU as core/numerics.py records it (the probe runs beside the server)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read().split("\n\n", 1)[0]
    except OSError:
        return {}
    fields = {
        k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())
    }
    return {
        "vendor": fields.get("vendor_id"),
        "family": fields.get("cpu family"),
        "model_id": fields.get("model"),
        "flags": set(fields.get("flags", "").split()),
    }


def _cause(recorded: dict | None) -> str:
    """Why the answer differs, as far as the probe can tell beside the server: the CPU."""
    if recorded is None:
        return "recorded where: unknown (goldens older than fingerprints)"
    cpu, here = recorded.get("cpu") or {}, _cpu()
    env = recorded.get("env") or {}
    if all(key in env for key in PINNED):
        missing = [flag for flag in ("avx2", "fma") if here and flag not in here["flags"]]
        return (
            f"portable numerics: this CPU lacks {', '.join(missing)} for the pinned paths"
            if missing
            else "recorded portable on a CPU of this kind: the model's answers or its libraries "
            "changed (verify names the fields)"
        )
    differ = [
        f"cpu.{key}: {cpu.get(key)} → {here.get(key)}"
        for key in ("vendor", "family", "model_id")
        if here and cpu.get(key) != here.get(key)
    ]
    isa = set(cpu.get("isa") or [])
    now = set(FLAGS) & here.get("flags", set())
    if here and now != isa:
        changes = [f"+{flag}" for flag in sorted(now - isa)] + [f"-{f}" for f in sorted(isa - now)]
        differ.append(f"cpu.isa: {' '.join(changes)}")
    if differ:
        return "recorded on another machine class: " + "; ".join(differ)
    return "same CPU as recorded: the model's answers changed, or its libraries did"


# the variables core/numerics.py's portable_env sets: all of them set = recorded portable
# fmt: off
PINNED = ("MKL_CBWR", "MKL_DYNAMIC", "MKL_NUM_THREADS", "OMP_DYNAMIC", "OMP_NUM_THREADS",
          "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS",
          "NPY_DISABLE_CPU_FEATURES")
# fmt: on
# the CPU features core/numerics.py records (DISPATCH_FLAGS)
FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)


def golden_problems(url: str, name: str, version: int, golden: Path, timeout: float) -> list:
    """What differs between the server's answer for golden's first input and golden's first
    output, of the machine class whose answer it is (any of the golden's classes); when none is,
    the cause as far as the CPU tells it."""
    import numpy as np

    with np.load(golden, allow_pickle=False) as arrays:  # the first sample only
        inputs = {
            key.split(".", 2)[2]: _golden_array(arrays[key])
            for key in arrays.files
            if key.startswith("input.0.")
        }
        classes = _classes(arrays)
    outputs = classes[0][1]
    try:
        got = _infer(
            f"{url}/v2/models/{name}/versions/{version}/infer", inputs, list(outputs), timeout
        )
    except (urllib.error.URLError, OSError, ValueError) as e:
        return [f"{name} v{version}: golden inference failed: {e}"]
    missing = [f"{name} v{version}: output {key} missing" for key in outputs if key not in got]
    if missing:
        return missing
    if any(all(_same(got[key], each[key]) for key in each) for _, each in classes):
        return []
    return [
        f"{name} v{version}: output {key} differs from its golden ({_cause(classes[0][0])})"
        for key, expected in outputs.items()
        if not _same(got[key], expected)
    ]


def problems(expected: list[Expected], url: str, timeout: float) -> list[str]:
    """Every problem with what the server serves (an empty list: ready, or healthy). timeout: the
    whole check's seconds (the index and every golden inference share them), so the probe ends
    before the kubelet's or Docker's own timeout however many models there are."""
    deadline = time.monotonic() + timeout
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
            left = deadline - time.monotonic()
            if version in versions and left <= 0:
                found.append(f"{model.name} v{version}: not checked, past --timeout {timeout:g} s")
            elif version in versions:
                found += golden_problems(url, model.name, version, golden, left)
    return found


def check(folder: Path, url: str, timeout: float) -> list:
    """Every problem that makes this pod not ready (--folder)."""
    return problems(from_folder(folder), url, timeout)


def check_repository(repository: Path, url: str, timeout: float) -> list:
    """Every problem that makes this container unhealthy (--repository)."""
    return problems(from_repository(repository), url, timeout)


def main() -> int:
    # NOTE: run in place (builder/publish/), Python puts this file's folder first on sys.path, where
    # publish/inspect.py would shadow the standard library's inspect (numpy imports it). The probe
    # needs nothing beside it: drop the folder before anything imports numpy.
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [entry for entry in sys.path if str(Path(entry or ".").resolve()) != here]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--folder", type=Path, help="expect.json, goldens (Kubernetes readiness)")
    source.add_argument("--repository", type=Path, help="a repository, its manifest (HEALTHCHECK)")
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds for the whole check")
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
