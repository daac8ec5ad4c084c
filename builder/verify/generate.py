"""A decoupled model (Triton's vLLM backend) as a verification runner: Triton's generate extension,
POST v2/models/<m>/versions/<v>/generate for a request answered once and .../generate_stream (server-sent
events, one per response) for a streamed one. A stream's chunking is not reproducible (vLLM coalesces tokens
when the frontend is behind: 15 or 16 responses for 16 tokens, seen on the H200), so a streamed request is
compared as what the client assembles: text concatenated, per-token JSON lists (log-probs) joined into one list,
per-response counts summed, other numbers as the last response gives them. Every token id and log-prob stays
pinned bit for bit; only the chunk boundaries are not."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tritonbuild.core.stores import with_scheme
from tritonbuild.repository.manifest import ManifestModel
from tritonbuild.verify.goldens import NP_DTYPES
from tritonbuild.verify.runners import InferError

Sample = dict[str, np.ndarray]


def _json_value(arr: np.ndarray):
    """One request input as the generate endpoint takes it: a scalar for one element, else a list."""
    values = [v.decode() if isinstance(v, bytes) else v.item() if hasattr(v, "item") else v for v in arr.ravel()]
    return values[0] if len(values) == 1 else values


def _events(response) -> list[dict]:
    """The JSON objects of a server-sent-event stream ('data: {...}' lines)."""
    out = []
    for raw in response:
        line = raw.decode().strip()
        if line.startswith("data:"):
            out.append(json.loads(line[len("data:"):]))
    return out


def _array(tensor, values: list) -> np.ndarray:
    if tensor.dtype == "bytes":
        return np.array([v.encode() for v in values], dtype=np.object_)
    return np.array(values, dtype=NP_DTYPES[tensor.dtype])


def _joined_json_lists(values: list[str]) -> str | None:
    try:
        parts = [json.loads(v) for v in values]
    except ValueError:
        return None
    return json.dumps([x for part in parts for x in part]) if all(isinstance(p, list) for p in parts) else None


def _assembled(tensor, values: list) -> np.ndarray:
    """One streamed request's responses as the client assembles them (see the module's docstring)."""
    if tensor.dtype == "bytes":
        joined = _joined_json_lists(values)
        return _array(tensor, [joined if joined is not None else "".join(values)])
    if tensor.dims == [-1] and np.issubdtype(NP_DTYPES[tensor.dtype], np.integer):
        return _array(tensor, [sum(values)])
    return _array(tensor, values[-1:])


class GenerateRunner:
    """infer / infer_concurrent / close over Triton's generate extension (HTTP, no client library)."""

    def __init__(self, url: str, model: ManifestModel, timeout: float = 120.0):
        self.base = with_scheme(url.rstrip("/"))
        self.model = model
        self.timeout = timeout

    def _post(self, sample: Sample) -> list[dict]:
        body = {name: _json_value(arr) for name, arr in sample.items()}
        stream = bool(body.get("stream", False))
        path = f"/v2/models/{self.model.name}/versions/{self.model.version}/generate{'_stream' if stream else ''}"
        request = urllib.request.Request(self.base + path, data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                events = _events(response) if stream else [json.loads(response.read())]
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            raise InferError(f"tritonserver answered an error: {text}") from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise InferError(f"generate request to {self.base}{path} failed: {e}") from None
        errors = [event["error"] for event in events if "error" in event]
        if errors or not events:
            raise InferError(f"tritonserver answered an error: {errors[0] if errors else 'no response'}")
        return events

    def infer(self, sample: Sample) -> Sample:
        events = self._post(sample)
        got = {}
        for tensor in self.model.outputs:
            values = []
            for event in events:
                if tensor.name in event:
                    value = event[tensor.name]
                    values.extend(value if isinstance(value, list) else [value])
            if values:
                got[tensor.name] = _assembled(tensor, values) if len(events) > 1 else _array(tensor, values)
        if not got:
            raise InferError(f"the model returned none of its outputs {[t.name for t in self.model.outputs]}")
        return got

    def infer_concurrent(self, samples: list[Sample]) -> list[Sample]:
        with ThreadPoolExecutor(max_workers=max(1, len(samples))) as pool:
            return list(pool.map(self.infer, samples))

    def close(self) -> None:
        return None
