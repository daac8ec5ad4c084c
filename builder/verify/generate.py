"""A decoupled model (Triton's vLLM backend) as a verification runner: Triton's generate extension,
POST v2/models/<m>/versions/<v>/generate for a request answered once and .../generate_stream
(server-sent events, one per response) for a streamed one. A stream's chunking is not reproducible
(vLLM coalesces tokens when the frontend is behind: 15 or 16 responses for 16 tokens, seen on the
H200), so a streamed request is compared as what the client assembles: text concatenated, per-token
JSON lists (log-probs) joined into one list, per-response counts summed, other numbers as the last
response gives them. Every token id and log-prob stays pinned bit for bit; only the chunk boundaries
are not."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tritonbuild.core.stores import with_scheme
from tritonbuild.repository.manifest import ManifestModel
from tritonbuild.triton.plain_http import ErrorAnswer, post_json
from tritonbuild.verify.goldens import NP_DTYPES
from tritonbuild.verify.runners import InferError

Sample = dict[str, np.ndarray]
# The other requests of an under-load check: prompts of several lengths, each asking for a number of
# tokens that differs from the golden's, so requests join and leave the running batch while the
# golden one decodes.
FILLER_PROMPTS = [
    "Once",
    "The server keeps every version it published until",
    "A batch of requests",
    "Weights are quantized to four bits per value with one scale for each group of",
    "Concurrency changes",
    "Answers must not depend on who else is asking, so that",
]
FILLER_TOKENS = (8, 48)
LOAD_HEAD_START_S = 0.05  # the others are admitted before the golden request arrives


def _filler(sample: Sample, i: int) -> Sample:
    """Another request like sample (its inputs, other prompt and length, not streamed)."""
    filler = dict(sample)
    if "text_input" in sample:
        prompt = f"{FILLER_PROMPTS[i % len(FILLER_PROMPTS)]} {i}"
        filler["text_input"] = np.array([prompt.encode()], dtype=np.object_)
    if "stream" in sample:
        filler["stream"] = np.array([False])
    if "sampling_parameters" in sample:
        params = json.loads(_json_value(sample["sampling_parameters"]))
        low, high = FILLER_TOKENS
        params["max_tokens"] = low + (i * 7) % (high - low)
        filler["sampling_parameters"] = np.array(
            [json.dumps(params, sort_keys=True).encode()], dtype=np.object_
        )
    return filler


def _steps(answer: Sample | None) -> list[tuple[str, float]] | None:
    """(token id, log-prob) per generated token from the vLLM backend's `logprobs` output (JSON: one
    {id: {logprob, rank, decoded_token}} per token, the chosen token first), or None when the answer
    has none."""
    if answer is None or "logprobs" not in answer or answer["logprobs"].size != 1:
        return None
    value = answer["logprobs"].ravel()[0]
    try:
        steps = json.loads(value.decode() if isinstance(value, bytes) else value)
        return [(next(iter(step)), float(next(iter(step.values()))["logprob"])) for step in steps]
    except (ValueError, TypeError, KeyError, StopIteration, AttributeError):
        return None


def token_difference(alone: Sample, loaded: Sample) -> dict | None:
    """How a generated answer under load differs from the answer alone, token by token: whether
    token ids differ or only log-probs, the first differing position, how many positions differ, the
    largest log-prob difference where the tokens agree. None when the answers carry no per-token
    log-probs."""
    a, b = _steps(alone), _steps(loaded)
    if a is None or b is None:
        return None
    ids_at = [
        i for i in range(max(len(a), len(b))) if i >= min(len(a), len(b)) or a[i][0] != b[i][0]
    ]
    same_ids = [i for i in range(min(len(a), len(b))) if a[i][0] == b[i][0]]
    lp_at = [i for i in same_ids if a[i][1] != b[i][1]]
    return {
        "ids_differ": bool(ids_at),
        "logprobs_differ": bool(lp_at) or bool(ids_at),
        "first_position": min(ids_at + lp_at) if ids_at or lp_at else None,
        "first_id_position": ids_at[0] if ids_at else None,
        "positions": len(set(ids_at + lp_at)),
        "tokens": len(a),
        "max_logprob_diff": max((abs(a[i][1] - b[i][1]) for i in lp_at), default=0.0),
    }


def _json_value(arr: np.ndarray):
    """One request input as the generate endpoint takes it: a scalar for one element, else a
    list."""
    values = [
        v.decode() if isinstance(v, bytes) else v.item() if hasattr(v, "item") else v
        for v in arr.ravel()
    ]
    return values[0] if len(values) == 1 else values


def _events(response) -> list[dict]:
    """The JSON objects of a server-sent-event stream ('data: {...}' lines)."""
    out = []
    for raw in response:
        line = raw.decode().strip()
        if line.startswith("data:"):
            out.append(json.loads(line[len("data:") :]))
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
    return (
        json.dumps([x for part in parts for x in part])
        if all(isinstance(p, list) for p in parts)
        else None
    )


def _assembled(tensor, values: list) -> np.ndarray:
    """One streamed request's responses as the client assembles them (see the module's
    docstring)."""
    if tensor.dtype == "bytes":
        joined = _joined_json_lists(values)
        return _array(tensor, [joined if joined is not None else "".join(values)])
    if tensor.dims == [-1] and np.issubdtype(NP_DTYPES[tensor.dtype], np.integer):
        return _array(tensor, [sum(values)])
    return _array(tensor, values[-1:])


class GenerateRunner:
    """infer / infer_concurrent / close over Triton's generate extension (HTTP, no client
    library)."""

    def __init__(self, url: str, model: ManifestModel, timeout: float = 120.0):
        self.base = with_scheme(url.rstrip("/"))
        self.model = model
        self.timeout = timeout

    def _post(self, sample: Sample) -> list[dict]:
        body = {name: _json_value(arr) for name, arr in sample.items()}
        stream = bool(body.get("stream", False))
        endpoint = "generate_stream" if stream else "generate"
        path = f"/v2/models/{self.model.name}/versions/{self.model.version}/{endpoint}"
        try:
            with post_json(self.base + path, body, self.timeout) as response:
                events = _events(response) if stream else [json.loads(response.read())]
        except ErrorAnswer as e:
            raise InferError(f"tritonserver answered an error: {e.text}") from None
        except (OSError, ValueError) as e:
            raise InferError(f"generate request to {self.base}{path} failed: {e}") from None
        errors = [event["error"] for event in events if "error" in event]
        if errors or not events:
            raise InferError(
                f"tritonserver answered an error: {errors[0] if errors else 'no response'}"
            )
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
                got[tensor.name] = (
                    _assembled(tensor, values) if len(events) > 1 else _array(tensor, values)
                )
        if not got:
            raise InferError(
                f"the model returned none of its outputs {[t.name for t in self.model.outputs]}"
            )
        return got

    def infer_amid(self, sample: Sample, others: int) -> Sample:
        """sample's answer while `others` other requests are in flight: they are sent first
        (non-streamed, other prompts, other lengths, so the batch around it changes from step to
        step), then sample; every answer is awaited, and a failed one fails the check (a server that
        drops requests under load is not verified)."""
        fillers = [_filler(sample, i) for i in range(others)]
        with ThreadPoolExecutor(max_workers=others + 1) as pool:
            running = [pool.submit(self._post, filler) for filler in fillers]
            time.sleep(LOAD_HEAD_START_S)
            target = pool.submit(self.infer, sample)
            for future in running:
                future.result()
            return target.result()

    def infer_concurrent(self, samples: list[Sample]) -> list[Sample]:
        with ThreadPoolExecutor(max_workers=max(1, len(samples))) as pool:
            return list(pool.map(self.infer, samples))

    def close(self) -> None:
        return None
