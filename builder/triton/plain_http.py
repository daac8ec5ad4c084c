"""The two Triton endpoints tritonclient has no call for, sent over the standard library: the
generate extension (POST v2/models/<m>/versions/<v>/generate[_stream], verify/generate.py) and the
Prometheus metrics text (GET :8002/metrics, server/status.py). Everything else goes through
tritonclient (triton/client.py)."""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator


class ErrorAnswer(Exception):
    """The server answered with an HTTP error status; text is its body (Triton's {"error": ...}
    unwrapped)."""

    def __init__(self, status: int, text: str):
        super().__init__(f"HTTP {status}: {text}")
        self.status, self.text = status, text


@contextlib.contextmanager
def post_json(url: str, body: dict, timeout: float) -> Iterator:
    """POST body as JSON; yields the open response (read it whole, or line by line for server-sent
    events). An error status raises ErrorAnswer; no answer raises OSError (URLError is one)."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        raise _error_answer(e) from None
    with response:
        yield response


def get_text(url: str, timeout: float) -> str:
    """GET url's body as text; an error status raises ErrorAnswer, no answer raises OSError."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        raise _error_answer(e) from None


def _error_answer(error: urllib.error.HTTPError) -> ErrorAnswer:
    text = error.read().decode(errors="replace")
    with contextlib.suppress(ValueError, AttributeError):
        text = json.loads(text).get("error", text)
    return ErrorAnswer(error.code, text)
