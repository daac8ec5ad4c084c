"""benchmarks/vllm/measure.py's requests to Triton's generate endpoint (the server answers on the GPU machine; here
urlopen is stood in and records the bodies): greedy, and seeded top-p sampling as verify's seeded-sampling path sends
it, each request its own seed."""

from __future__ import annotations

import io
import json
import threading

from benchmarks.vllm import measure
from tritonbuild.verify import traffic


def _server(monkeypatch) -> list[dict]:
    bodies, lock = [], threading.Lock()

    def urlopen(req, timeout):
        with lock:
            bodies.append(json.loads(req.data))
        steps = [{"7": {"logprob": -1.5}}] * 2
        answer = {"logprobs": json.dumps(steps), "num_output_tokens": 2}
        return io.BytesIO(json.dumps(answer).encode())

    monkeypatch.setattr(measure.urllib.request, "urlopen", urlopen)
    return bodies


def test_sampled_throughput_sends_seeded_top_p_with_a_seed_per_request(monkeypatch):
    bodies = _server(monkeypatch)
    out = measure.throughput_sampled("http://x", "m", "1,4")
    assert out["greedy"] is False and out["sampling"] == measure.SAMPLED
    assert [row["streams"] for row in out["rows"]] == [1, 4]
    params = [json.loads(b["sampling_parameters"]) for b in bodies[1:]]  # after the greedy warm-up
    assert all(p["temperature"] == traffic.SAMPLING["temperature"] for p in params)
    assert all(p["top_p"] == traffic.SAMPLING["top_p"] for p in params)
    rows_of_4 = [p["seed"] for p in params[8:]]  # 8 requests at 1 stream, then 4 streams x 4
    assert sorted(rows_of_4) == list(range(16))


def test_greedy_throughput_is_unchanged(monkeypatch):
    bodies = _server(monkeypatch)
    out = measure.throughput("http://x", "m", "2")
    assert out["greedy"] is True and "sampling" not in out
    params = [json.loads(b["sampling_parameters"]) for b in bodies]
    assert all(p["temperature"] == 0 and "seed" not in p and "top_p" not in p for p in params)


def test_every_key_measure_sends_is_a_field_of_vllms_sampling_params(monkeypatch):
    """Triton's vLLM backend builds vLLM's SamplingParams from the request's sampling_parameters (a key that is not
    one of its fields fails the request): the keys sent, greedy and sampled, against the fields recorded from the
    vLLM 0.22.0 wheel (facts/vllm_plugin.json "sampling_params", each line checked where the wheel is on disk)."""
    from tests.contracts.facts import load

    fields = {
        fact["text"].split(":")[0] for fact in load("vllm_plugin")["sampling_params"]["facts"]
    }
    bodies = _server(monkeypatch)
    measure.throughput_sampled("http://x", "m", "2")
    sent = {key for b in bodies for key in json.loads(b["sampling_parameters"])}
    assert sent == {"temperature", "top_p", "seed", "max_tokens", "logprobs", "ignore_eos"}
    assert sent <= fields
