"""verify/generate.py against a loopback HTTP server answering as Triton's generate extension does
(POST .../generate: one JSON object; .../generate_stream: server-sent events 'data: {...}'), in the shapes the vLLM
backend gives (text chunks, per-token log-prob lists as JSON text, per-response token counts)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import numpy as np
import pytest

from tritonbuild.recipe.models import TensorSpec
from tritonbuild.verify.generate import GenerateRunner
from tritonbuild.verify.runners import InferError

OUTPUTS = [
    TensorSpec(name="text_output", dtype="bytes", dims=[-1]),
    TensorSpec(name="logprobs", dtype="bytes", dims=[-1]),
    TensorSpec(name="num_input_tokens", dtype="uint32", dims=[1]),
    TensorSpec(name="num_output_tokens", dtype="uint32", dims=[-1]),
]
TOKENS = [("He", 11, -0.5), ("llo", 12, -0.25), (" wor", 13, -1.5), ("ld", 14, -0.125)]


def _chunk(tokens) -> dict:
    return {
        "model_name": "m",
        "model_version": "1",
        "text_output": "".join(t for t, _, _ in tokens),
        "logprobs": json.dumps(
            [{str(i): {"logprob": lp, "rank": 1, "decoded_token": t}} for t, i, lp in tokens]
        ),
        "num_input_tokens": 3,
        "num_output_tokens": len(tokens),
    }


class _Triton(BaseHTTPRequestHandler):
    chunking: ClassVar[list[int]] = [1, 1, 1, 1]
    seen: ClassVar[list] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append((self.path, body))
        if body["text_input"] == "fail":
            self._send(400, {"error": "in ensemble 'm', bad input"})
        elif self.path.endswith("/generate_stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            start = 0
            for n in self.chunking:
                self.wfile.write(
                    f"data: {json.dumps(_chunk(TOKENS[start : start + n]))}\n\n".encode()
                )
                start += n
        else:
            self._send(200, _chunk(TOKENS))

    def _send(self, code: int, doc: dict) -> None:
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        return None


@pytest.fixture
def runner():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Triton)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    model = type("M", (), {"name": "m", "version": 1, "outputs": OUTPUTS})()
    yield GenerateRunner(f"http://127.0.0.1:{server.server_address[1]}", model)
    server.shutdown()


def _sample(prompt: str, stream: bool) -> dict:
    return {
        "text_input": np.array([prompt.encode()], dtype=np.object_),
        "stream": np.array([stream]),
        "sampling_parameters": np.array([b'{"temperature": 0}'], dtype=np.object_),
    }


def test_one_response_comes_back_as_the_models_outputs(runner):
    got = runner.infer(_sample("Hi", False))
    assert (
        got["text_output"].tolist() == [b"Hello world"]
        and got["num_output_tokens"].dtype == np.uint32
    )
    path, body = _Triton.seen[-1]
    assert path == "/v2/models/m/versions/1/generate"
    assert body == {
        "text_input": "Hi",
        "stream": False,
        "sampling_parameters": '{"temperature": 0}',
    }


def test_a_stream_is_compared_as_the_client_assembles_it_whatever_its_chunking(runner, monkeypatch):
    """vLLM coalesces tokens when the frontend is behind (15 or 16 responses for 16 tokens on the H200): the
    assembled stream is the same, token ids and log-probs included, and equals the answer not streamed."""
    monkeypatch.setattr(_Triton, "chunking", [1, 1, 1, 1])
    four = runner.infer(_sample("Hi", True))
    monkeypatch.setattr(_Triton, "chunking", [2, 1, 1])
    three = runner.infer(_sample("Hi", True))
    assert _Triton.seen[-1][0] == "/v2/models/m/versions/1/generate_stream"
    whole = runner.infer(_sample("Hi", False))
    for name in ("text_output", "logprobs", "num_input_tokens", "num_output_tokens"):
        assert four[name].tolist() == three[name].tolist() == whole[name].tolist(), name
    assert four["num_output_tokens"].tolist() == [4] and four["num_input_tokens"].tolist() == [3]


def test_an_error_answer_is_an_infer_error_with_tritons_text(runner):
    with pytest.raises(InferError, match="bad input"):
        runner.infer(_sample("fail", False))
    assert [
        g["text_output"].tolist() for g in runner.infer_concurrent([_sample("a", False)] * 3)
    ] == [[b"Hello world"]] * 3
