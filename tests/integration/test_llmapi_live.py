"""runtime: pytorch live in the embedded tritonserver: the generated LLM-API Python model and model.yaml, with
TensorRT-LLM's LLM API replaced by a stand-in that enforces the recorded argument contract
(tests/fixtures/llm/fake_tensorrt_llm: TorchLlmArgs fields, _TorchLLM's refusal of TrtLlmArgs-only ones).
Requests use upstream's llmapi interface; the streaming model is decoupled and answers through its sender."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import yaml

from tests.conftest import EXAMPLES, ROOT
from tests.contracts.facts import FACTS
from tests.integration.test_llm_live import CLIENTS, _infer, _request, _stream
from tritonbuild.server.embedded import EmbeddedServer, ModelLoadError

pytestmark = [pytest.mark.triton, pytest.mark.slow]
FAKE = ROOT / "tests" / "fixtures" / "llm" / "fake_tensorrt_llm"
PROMPT = "Grüße, servers answer requests."


def _fake(vdir) -> None:
    shutil.copytree(FAKE, vdir / "tensorrt_llm")
    shutil.copy(FACTS / "llm_args.json", vdir / "tensorrt_llm" / "llm_args.json")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from click.testing import CliRunner

    from tritonbuild.cli import main

    work = tmp_path_factory.mktemp("llmapi")
    repo = work / "REPO"
    shutil.copytree(EXAMPLES / "tiny-llama", work / "tiny-llama")
    base = (EXAMPLES / "tiny-llama-int4.yaml").read_text().replace("quantization: int4_weight_only",
                                                                   "quantization: none\nruntime: pytorch")
    for name, streaming in (("pt", "false"), ("pt-stream", "true")):
        (work / f"{name}.yaml").write_text(base.replace("name: tiny-llama\n", f"name: {name}\n")
                                           .replace("streaming: false", f"streaming: {streaming}"))
        r = CliRunner().invoke(main, ["build", str(work / f"{name}.yaml"), "-o", str(work / name)],
                               catch_exceptions=False)
        assert r.exit_code == 0, r.stderr
        shutil.copytree(work / name, repo, dirs_exist_ok=True, ignore=shutil.ignore_patterns("tritonbuild-*"))
        _fake(repo / name / "1")
    # what runtime: pytorch wrote before #9: quant_config, which the PyTorch backend refuses at LLM()
    shutil.copytree(repo / "pt", repo / "pt-old")
    (repo / "pt-old" / "config.pbtxt").write_text((repo / "pt" / "config.pbtxt").read_text()
                                                  .replace('name: "pt"', 'name: "pt-old"'))
    spec = yaml.safe_load((repo / "pt-old" / "1" / "model.yaml").read_text())
    (repo / "pt-old" / "1" / "model.yaml").write_text(yaml.safe_dump({**spec, "quant_config": {"quant_algo": "FP8"}}))
    with EmbeddedServer(repo) as s:
        for name in ("pt", "pt-stream", "pt_openai", "pt-stream_openai"):
            s.load(name)
        yield s


def _inputs(**extra) -> dict:
    d = {"text_input": np.array([PROMPT.encode()], dtype=np.object_),
         "sampling_param_max_tokens": np.array([12], dtype=np.int32)}
    d.update(extra)
    return d


def test_a_model_yaml_with_trt_only_arguments_fails_the_load_with_upstreams_message(server):
    with pytest.raises(ModelLoadError, match="specific to TensorRT backend and cannot be used with PyTorch"):
        server.load("pt-old")


def test_non_streaming_request_with_sampling_params(server):
    import tritonclient.http as http
    from tritonclient.utils import np_to_triton_dtype

    client = http.InferenceServerClient(server.http_url)
    inputs = _inputs(return_finish_reason=np.array([True]), sampling_param_stop=np.array([b"r"], dtype=np.object_))
    reqs = []
    for name, arr in inputs.items():
        i = http.InferInput(name, list(arr.shape), np_to_triton_dtype(arr.dtype))
        i.set_data_from_numpy(arr)
        reqs.append(i)
    res = client.infer("pt", reqs, outputs=[http.InferRequestedOutput("text_output"),
                                            http.InferRequestedOutput("finish_reason")])
    assert res.as_numpy("text_output")[0].decode() == PROMPT[:12].split("r")[0]
    assert res.as_numpy("finish_reason")[0] == b"length"


def test_streaming_sends_the_text_piece_by_piece(server):
    responses = _stream(server, "pt-stream", _inputs(streaming=np.array([True])))
    pieces = [r["text_output"].reshape(-1)[0].decode() for r in responses]
    assert len(pieces) > 1 and "".join(pieces) == PROMPT[:12]


@pytest.mark.parametrize("client", ["openai chat", "openai completions+options", "genai-perf"])
@pytest.mark.parametrize("entry", ["pt_openai", "pt-stream_openai"])
def test_the_openai_adapter_answers_the_recorded_client_requests(server, client, entry):
    """Upstream's llmapi model takes text_input/streaming/sampling_param_* without a batch dimension, so the
    OpenAI frontend's and genai-perf's requests get 400 there; the generated <name>_openai model takes them
    and asks the LLM-API model (here on the contract-enforcing stand-in of tensorrt_llm.LLM)."""
    kind = {"openai chat": CLIENTS["openai_frontend"]["always"], "genai-perf": CLIENTS["genai_perf"]["default"],
            "openai completions+options": {**CLIENTS["openai_frontend"]["always"],
                                           **{k: v for k, v in CLIENTS["openai_frontend"]["optional"].items()
                                              if not k.startswith(("guided_", "lora_"))}}}[client]
    inputs = _request(kind, PROMPT, max_tokens=12, stop_words=b"zzz", top_p=0.9, temperature=0.5)
    if entry.startswith("pt-stream"):
        inputs["stream"] = np.array([[True]])
        pieces = [r["text_output"].reshape(-1)[0] for r in _stream(server, entry, inputs)]
        assert len(pieces) > 1 and b"".join(pieces).decode() == PROMPT[:12]
    else:
        got = _infer(server, entry, inputs, ["text_output"])
        assert got["text_output"].reshape(-1)[0].decode() == PROMPT[:12]


def test_the_llmapi_model_itself_refuses_the_openai_frontends_request(server):
    """Why the adapter exists: upstream's interface (max_batch_size 0, sampling_param_*) refuses it."""
    with pytest.raises(Exception, match="unexpected inference input"):
        _infer(server, "pt", _request(CLIENTS["openai_frontend"]["always"], PROMPT), ["text_output"])


def _adapter_answer(server, entry, inputs) -> tuple[str, list[dict]]:
    """The text a client assembles, and every response (one, or a stream's pieces)."""
    if entry.startswith("pt-stream"):
        inputs["stream"] = np.array([[True]])
        responses = _stream(server, entry, inputs)
    else:
        responses = [_infer(server, entry, inputs, ["text_output", "num_input_tokens", "num_output_tokens"])]
    return b"".join(r["text_output"].reshape(-1)[0] for r in responses).decode(), responses


@pytest.mark.parametrize("entry", ["pt_openai", "pt-stream_openai"])
def test_the_adapter_returns_the_token_counts_the_openai_frontend_sums_as_usage(server, entry):
    """return_num_input_tokens / return_num_output_tokens (always sent by the frontend): num_input_tokens is the
    prompt's on every response, num_output_tokens the tokens new in each, so the frontend's sum is the whole
    completion (the stand-in's token is a character)."""
    inputs = _request(CLIENTS["openai_frontend"]["always"], PROMPT, max_tokens=12)
    text, responses = _adapter_answer(server, entry, inputs)
    assert text == PROMPT[:12]
    assert {int(r["num_input_tokens"].reshape(-1)[0]) for r in responses} == {len(PROMPT)}
    assert sum(int(r["num_output_tokens"].reshape(-1)[0]) for r in responses) == 12
    assert all(r["num_output_tokens"].dtype == np.int32 for r in responses)


@pytest.mark.parametrize("entry", ["pt_openai", "pt-stream_openai"])
def test_genai_perfs_deterministic_request_gets_exactly_min_length_tokens(server, entry):
    """--output-tokens-mean-deterministic sends min_length = max_tokens: answered, and held to that length where
    the generation would stop sooner (the prompt ends, a stop word)."""
    n = len(PROMPT) + 9
    free = _request(CLIENTS["genai_perf"]["default"], PROMPT, max_tokens=n)
    assert _adapter_answer(server, entry, free)[0] == PROMPT  # the stand-in stops where the prompt ends
    held = _request(CLIENTS["genai_perf"]["deterministic"], PROMPT, max_tokens=n, min_length=n)
    text, _ = _adapter_answer(server, entry, held)
    assert len(text) == n and text == (PROMPT * 2)[:n]


def test_echo_and_stop_words_of_the_openai_frontends_completions_request(server):
    """echo: true → exclude_input_in_output false → the prompt comes back in front, and usage counts only what was
    generated; stop → stop_words cut the text."""
    kind = {**CLIENTS["openai_frontend"]["always"],
            "exclude_input_in_output": CLIENTS["openai_frontend"]["optional"]["exclude_input_in_output"],
            "stop_words": CLIENTS["openai_frontend"]["optional"]["stop_words"]}
    echo = _request(kind, PROMPT, max_tokens=8, exclude_input_in_output=False)
    text, (response,) = _adapter_answer(server, "pt_openai", echo)
    assert text == PROMPT + PROMPT[:8] and int(response["num_output_tokens"].reshape(-1)[0]) == 8
    stop = _request(kind, PROMPT, max_tokens=20, stop_words=b"ser")
    assert _adapter_answer(server, "pt_openai", stop)[0] == PROMPT[:PROMPT.index("ser")]
