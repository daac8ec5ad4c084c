"""runtime: pytorch live in the embedded tritonserver: the generated LLM-API Python model and model.yaml, with
TensorRT-LLM's LLM API replaced by a stand-in that enforces the recorded argument contract
(tests/fixtures/llm/fake_tensorrt_llm: TorchLlmArgs fields, _TorchLLM's refusal of TrtLlmArgs-only ones).
Requests use upstream's llmapi interface; the streaming model is decoupled and answers through its sender."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml

from tests.conftest import EXAMPLES, ROOT, llmapi_recipe, write_eagle_head
from tests.contracts.facts import FACTS, load
from tests.integration.test_llm_live import CLIENTS, _frontend_loras, _infer, _request, _stream
from tritonbuild.server.embedded import EmbeddedServer
from tritonbuild.server.loading import ModelLoadError

pytestmark = [pytest.mark.triton, pytest.mark.slow]
FAKE = ROOT / "tests" / "fixtures" / "llm" / "fake_tensorrt_llm"
PROMPT = "Grüße, servers answer requests."


def _fake(vdir) -> None:
    shutil.copytree(FAKE, vdir / "tensorrt_llm")
    for facts in ("llm_args.json", "trtllm_llmapi.json"):
        shutil.copy(FACTS / facts, vdir / "tensorrt_llm" / facts)


def _peft(d, rank=8) -> str:
    """A Hugging Face PEFT adapter directory (the LLM API's lora_ckpt_source hf)."""
    d.mkdir()
    (d / "adapter_config.json").write_text(
        json.dumps({"peft_type": "LORA", "r": rank, "target_modules": ["q_proj", "v_proj"]})
    )
    (d / "adapter_model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    return d.name


# name → what the recipe adds to the plain LLM-API recipe
FEATURES = {
    "pt": "",
    "pt-stream": "",
    "pt-lora": "lora:\n  adapters: {fr: fr-peft, de: de-peft}\n",
    "pt-guided": "serving:\n  guided_decoding: {backend: xgrammar}\n",
    "pt-spec": "speculative: {mode: eagle, max_draft_len: 3, draft_checkpoint: eagle3-head}\n",
    "pt-draft": "speculative: {mode: draft_target, max_draft_len: 4, draft_checkpoint: tiny-llama}\n",
    "pt-slow": "",
    "pt-multi": "serving:\n  gpu_device_ids: [0, 1]\n",
    "pt-echo": "serving:\n  exclude_input_in_output: false\n",
}
LATENCY_S = 0.5  # what one request takes on pt-slow's stand-in LLM (standin.json)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from click.testing import CliRunner

    from tritonbuild.cli import main

    work = tmp_path_factory.mktemp("llmapi")
    repo = work / "REPO"
    shutil.copytree(EXAMPLES / "tiny-llama", work / "tiny-llama")
    base = llmapi_recipe(
        (EXAMPLES / "tiny-llama-int4.yaml")
        .read_text()
        .replace("quantization: int4_weight_only", "quantization: none\nruntime: pytorch")
    )
    write_eagle_head(work / "eagle3-head", work / "tiny-llama")
    _peft(work / "fr-peft")
    _peft(work / "de-peft", rank=16)
    for name, extra in FEATURES.items():
        text = base.replace("name: tiny-llama\n", f"name: {name}\n").replace(
            "streaming: false", f"streaming: {'true' if name == 'pt-stream' else 'false'}"
        )
        if extra.startswith("serving:"):
            text = text.replace("serving:\n", extra)
        (work / f"{name}.yaml").write_text(
            text + (extra if extra.startswith(("lora", "spec")) else "")
        )
        r = CliRunner().invoke(
            main,
            ["build", str(work / f"{name}.yaml"), "-o", str(work / name)],
            catch_exceptions=False,
        )
        assert r.exit_code == 0, r.stderr
        shutil.copytree(
            work / name, repo, dirs_exist_ok=True, ignore=shutil.ignore_patterns("tritonbuild-*")
        )
        _fake(repo / name / "1")
    (repo / "pt-slow" / "1" / "tensorrt_llm" / "standin.json").write_text(
        json.dumps({"latency_s": LATENCY_S})
    )
    # what runtime: pytorch wrote before #9: quant_config, which the PyTorch backend refuses at LLM()
    shutil.copytree(repo / "pt", repo / "pt-old")
    (repo / "pt-old" / "config.pbtxt").write_text(
        (repo / "pt" / "config.pbtxt").read_text().replace('name: "pt"', 'name: "pt-old"')
    )
    spec = yaml.safe_load((repo / "pt-old" / "1" / "model.yaml").read_text())
    (repo / "pt-old" / "1" / "model.yaml").write_text(
        yaml.safe_dump({**spec, "quant_config": {"quant_algo": "FP8"}})
    )
    with EmbeddedServer(repo) as s:
        for name in FEATURES:
            s.load(name)
            s.load(f"{name}_openai")
        s.repo = repo
        yield s


def _inputs(**extra) -> dict:
    d = {
        "text_input": np.array([PROMPT.encode()], dtype=np.object_),
        "sampling_param_max_tokens": np.array([12], dtype=np.int32),
    }
    d.update(extra)
    return d


def test_a_model_yaml_with_trt_only_arguments_fails_the_load_with_upstreams_message(server):
    with pytest.raises(
        ModelLoadError, match="specific to TensorRT backend and cannot be used with PyTorch"
    ):
        server.load("pt-old")


def test_non_streaming_request_with_sampling_params(server):
    import tritonclient.http as http
    from tritonclient.utils import np_to_triton_dtype

    client = http.InferenceServerClient(server.http_url)
    inputs = _inputs(
        return_finish_reason=np.array([True]),
        sampling_param_stop=np.array([b"r"], dtype=np.object_),
    )
    reqs = []
    for name, arr in inputs.items():
        i = http.InferInput(name, list(arr.shape), np_to_triton_dtype(arr.dtype))
        i.set_data_from_numpy(arr)
        reqs.append(i)
    res = client.infer(
        "pt",
        reqs,
        outputs=[
            http.InferRequestedOutput("text_output"),
            http.InferRequestedOutput("finish_reason"),
        ],
    )
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
    kind = {
        "openai chat": CLIENTS["openai_frontend"]["always"],
        "genai-perf": CLIENTS["genai_perf"]["default"],
        "openai completions+options": {
            **CLIENTS["openai_frontend"]["always"],
            **{
                k: v
                for k, v in CLIENTS["openai_frontend"]["optional"].items()
                if not k.startswith(("guided_", "lora_"))
            },
        },
    }[client]
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
        _infer(
            server, "pt", _request(CLIENTS["openai_frontend"]["always"], PROMPT), ["text_output"]
        )


def _adapter_answer(server, entry, inputs) -> tuple[str, list[dict]]:
    """The text a client assembles, and every response (one, or a stream's pieces)."""
    if entry.startswith("pt-stream"):
        inputs["stream"] = np.array([[True]])
        responses = _stream(server, entry, inputs)
    else:
        responses = [
            _infer(server, entry, inputs, ["text_output", "num_input_tokens", "num_output_tokens"])
        ]
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
    assert (
        _adapter_answer(server, entry, free)[0] == PROMPT
    )  # the stand-in stops where the prompt ends
    held = _request(CLIENTS["genai_perf"]["deterministic"], PROMPT, max_tokens=n, min_length=n)
    text, _ = _adapter_answer(server, entry, held)
    assert len(text) == n and text == (PROMPT * 2)[:n]


def test_echo_and_stop_words_of_the_openai_frontends_completions_request(server):
    """echo: true → exclude_input_in_output false → the prompt comes back in front, and usage counts only what was
    generated; stop → stop_words cut the text."""
    kind = {
        **CLIENTS["openai_frontend"]["always"],
        "exclude_input_in_output": CLIENTS["openai_frontend"]["optional"][
            "exclude_input_in_output"
        ],
        "stop_words": CLIENTS["openai_frontend"]["optional"]["stop_words"],
    }
    echo = _request(kind, PROMPT, max_tokens=8, exclude_input_in_output=False)
    text, (response,) = _adapter_answer(server, "pt_openai", echo)
    assert text == PROMPT + PROMPT[:8] and int(response["num_output_tokens"].reshape(-1)[0]) == 8
    stop = _request(kind, PROMPT, max_tokens=20, stop_words=b"ser")
    assert _adapter_answer(server, "pt_openai", stop)[0] == PROMPT[: PROMPT.index("ser")]


def test_the_openai_frontends_lora_request_is_answered_through_the_llm_apis_lora_request(server):
    """The frontend's request for pt-lora_openai/<lora> (lora_task_id, with the .npy pair of multi_lora.json on first
    use) becomes the LLM-API model's lora_id / lora_name / lora_path: the stand-in LLM built with model.yaml's
    lora_config loads the packaged PEFT adapter (a rank above max_lora_rank or a path without adapter_config.json
    would fail). An unknown task, and any LoRA request to a model without adapters, are refused."""
    loras = _frontend_loras(server.repo, "pt-lora_openai")
    assert set(loras) == {"fr", "de"}
    task_id, weights, config = loras["de"]
    kind = CLIENTS["openai_frontend"]["always"]
    first = {
        **_request(kind, PROMPT, max_tokens=12),
        "lora_task_id": np.array([[task_id]], np.uint64),
        "lora_weights": weights,
        "lora_config": config,
    }
    for inputs in (
        first,
        {**_request(kind, PROMPT, max_tokens=12), "lora_task_id": np.array([[task_id]], np.uint64)},
    ):
        got = _infer(server, "pt-lora_openai", inputs, ["text_output"])
        assert got["text_output"].reshape(-1)[0].decode() == PROMPT[:12]
    with pytest.raises(Exception, match="LoRA task 99 is not one of this model's adapters"):
        _infer(
            server,
            "pt-lora_openai",
            {**_request(kind, PROMPT), "lora_task_id": np.array([[99]], np.uint64)},
            ["text_output"],
        )
    assert _frontend_loras(server.repo, "pt_openai") == {}
    with pytest.raises(Exception, match="unexpected inference input 'lora_"):
        _infer(server, "pt_openai", first, ["text_output"])


def test_the_llmapi_model_takes_upstreams_lora_inputs_under_upstreams_rule(server):
    facts = load("trtllm_llmapi")["lora"]
    path = str(server.repo / "pt-lora" / "1" / "lora" / "fr")
    lora = {
        "lora_id": np.array([3], np.uint64),
        "lora_name": np.array([b"fr"], np.object_),
        "lora_path": np.array([path.encode()], np.object_),
    }
    got = _infer(server, "pt-lora", {**_inputs(), **lora}, ["text_output"])
    assert got["text_output"][0].decode() == PROMPT[:12]
    with pytest.raises(Exception, match=facts["together_error"]):
        _infer(server, "pt-lora", {**_inputs(), "lora_id": lora["lora_id"]}, ["text_output"])
    with pytest.raises(
        Exception, match="lora_path does not exist on the Triton server's filesystem"
    ):
        _infer(
            server,
            "pt-lora",
            {**_inputs(), **lora, "lora_path": np.array([b"/nowhere"], np.object_)},
            ["text_output"],
        )


@pytest.mark.parametrize("entry", ["pt-guided_openai", "pt-guided"])
def test_the_openai_frontends_tool_choice_request_is_answered_where_guided_decoding_is_on(
    server, entry
):
    """tool_choice "required" makes the frontend send a json_schema guide (clients.json): it becomes
    SamplingParams.guided_decoding (GuidedDecodingParams.json) of an LLM built with guided_decoding_backend; a
    schema that is not JSON fails in the LLM API; the model without guided decoding refuses the guide (400)."""
    tool = CLIENTS["openai_frontend"]["tool_choice_guide"]
    schema = json.dumps({"type": "object", "properties": {"city": {"type": "string"}}}).encode()
    guide = {
        "guided_decoding_guide_type": tool["guided_decoding_guide_type"].encode(),
        "guided_decoding_guide": schema,
    }
    if entry.endswith("_openai"):
        kind = {
            **CLIENTS["openai_frontend"]["always"],
            **{
                k: v
                for k, v in CLIENTS["openai_frontend"]["optional"].items()
                if k.startswith("guided_")
            },
        }
        inputs = _request(kind, PROMPT, max_tokens=12, **guide)
    else:
        inputs = _inputs(**{k: np.array([v], np.object_) for k, v in guide.items()})
    got = _infer(server, entry, inputs, ["text_output"])
    assert got["text_output"].reshape(-1)[0].decode() == PROMPT[:12]
    bad = {
        k: (np.full_like(v, b"{not json") if k == "guided_decoding_guide" else v)
        for k, v in inputs.items()
    }
    with pytest.raises(Exception, match="Expecting property name"):
        _infer(server, entry, bad, ["text_output"])
    with pytest.raises(Exception, match="unexpected inference input 'guided_decoding_guide"):
        _infer(server, entry.replace("pt-guided", "pt"), inputs, ["text_output"])


PERF = load("trtllm_llmapi")["perf_metrics"]
TIMES = ("arrival_time_ns", "first_scheduled_time_ns", "first_token_time_ns", "last_token_time_ns")


def test_a_return_perf_metrics_request_gets_upstreams_perf_outputs_from_the_llmapi_model(server):
    want = ["text_output", *PERF["outputs"]]
    got = _infer(server, "pt", _inputs(**{PERF["input"]: np.array([True])}), want)
    newest = load("tensorrtllm_backend")["templates"]["llmapi_versions"][
        load("trtllm_llmapi")["template_commit"]
    ]
    declared = {t["name"]: t["data_type"] for t in newest["outputs"]}
    np_type = {"TYPE_INT32": np.int32, "TYPE_INT64": np.int64, "TYPE_FP32": np.float32}
    for name in PERF["outputs"]:
        assert got[name].dtype == np_type[declared[name]], name
    t = [int(got[k][0]) for k in TIMES]
    assert 0 < t[0] <= t[1] <= t[2] <= t[3]
    assert got["kv_cache_alloc_total_blocks"][0] >= 1


@pytest.mark.parametrize("entry", ["pt_openai", "pt-stream_openai"])
def test_a_return_perf_metrics_request_in_the_ensembles_format_is_answered_by_the_adapter(
    server, entry
):
    """The ensemble's return_perf_metrics input and its perf outputs (tensorrtllm_backend perf_metrics), from the
    LLM-API model's (the adapter's output_map)."""
    ensemble = load("tensorrtllm_backend")["perf_metrics"]
    inputs = {
        **_request(CLIENTS["genai_perf"]["default"], PROMPT, max_tokens=12),
        ensemble["input"]: np.array([[True]]),
    }
    names = [n for n in ensemble["outputs"] if n not in ("kv_cache_reused_blocks",)] + [
        "kv_cache_reused_blocks"
    ]
    if entry.startswith("pt-stream"):
        inputs["stream"] = np.array([[True]])
        responses = _stream(server, entry, inputs)
        got = responses[-1]
        assert b"".join(r["text_output"].reshape(-1)[0] for r in responses).decode() == PROMPT[:12]
    else:
        got = _infer(server, entry, inputs, ["text_output", *names])
    assert set(names) <= set(got), set(names) - set(got)
    t = [int(got[k].reshape(-1)[0]) for k in TIMES]
    assert 0 < t[0] <= t[1] <= t[2] <= t[3]
    assert got["acceptance_rate"].dtype == np.float32 and got["text_output"].shape == (1, 1)


@pytest.mark.parametrize(("model", "tag"), [("pt-spec", "Eagle"), ("pt-draft", "DraftTarget")])
def test_the_llm_api_is_built_with_the_packaged_draft_for_speculative_decoding(server, model, tag):
    """pt-spec / pt-draft loaded: the generated model turned model.yaml's speculative_config into a decoding config
    through update_llm_args_with_extra_dict (DecodingBaseConfig.from_dict), which the stand-in LLM requires as the
    1.x TorchLlmArgs does (a dict holding decoding_type is refused), with the draft checkpoint it loads."""
    got = _infer(server, model, _inputs(), ["text_output"])
    assert got["text_output"][0].decode() == PROMPT[:12]
    spec = yaml.safe_load((server.repo / model / "1" / "model.yaml").read_text())
    assert spec["speculative_config"]["decoding_type"] == tag
    assert tag in load("llm_args")["speculative_config"]["from_dict_types"]
    draft = server.repo / model / "1" / spec["speculative_config"]["speculative_model_dir"]
    assert (draft / "config.json").is_file()


def _concurrently(server, model, inputs, n) -> tuple[float, list[dict]]:
    """n requests sent together (one client each); the seconds until the last answer, and the answers."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    started = time.monotonic()
    with ThreadPoolExecutor(n) as pool:
        answers = list(pool.map(lambda _: _infer(server, model, inputs, ["text_output"]), range(n)))
    return time.monotonic() - started, answers


@pytest.mark.parametrize("entry", ["pt-slow", "pt-slow_openai"])
def test_concurrent_requests_to_a_non_streaming_model_are_served_concurrently(server, entry):
    """32 overlapping requests to a non-streaming LLM-API model (and its <name>_openai front) on a stand-in LLM that
    takes LATENCY_S per request: scheduled on the LLM's event loop as upstream's model does, they are answered in
    about one request's time, not 32 × LATENCY_S, and the stand-in saw them in flight together."""
    n = 32
    inputs = (
        _inputs()
        if entry == "pt-slow"
        else _request(CLIENTS["genai_perf"]["default"], PROMPT, max_tokens=12)
    )
    took, answers = _concurrently(server, entry, inputs, n)
    assert {a["text_output"].reshape(-1)[0].decode() for a in answers} == {PROMPT[:12]}
    assert took < n * LATENCY_S / 4, (
        f"{n} requests took {took:.1f} s; one at a time they take {n * LATENCY_S} s"
    )
    peak = json.loads(
        (server.repo / "pt-slow" / "1" / "tensorrt_llm" / "in_flight.json").read_text()
    )["peak"]
    assert peak >= n // 2


def test_each_instance_of_a_multi_instance_model_runs_on_its_own_gpus(server):
    """serving.gpu_device_ids [0, 1] at tp_size 1: two instances, each built its LLM with CUDA_VISIBLE_DEVICES set to
    its GPU and gpus_per_node 1 (upstream's multi-instance LLM-API model, facts llm_args.json route_keys)."""
    here = server.repo / "pt-multi" / "1" / "tensorrt_llm"
    seen = sorted(
        json.loads(f.read_text())["CUDA_VISIBLE_DEVICES"] for f in here.glob("placement-*.json")
    )
    assert seen == ["0", "1"]
    assert {json.loads(f.read_text())["gpus_per_node"] for f in here.glob("placement-*.json")} == {
        1
    }
    plain = [
        json.loads(f.read_text())
        for f in (server.repo / "pt" / "1" / "tensorrt_llm").glob("placement-*.json")
    ]
    assert [p["gpus_per_node"] for p in plain] == [
        None
    ]  # one instance on the server's GPUs: left as it is


def test_the_recipes_exclude_input_in_output_is_the_default_of_requests_that_do_not_say(server):
    """serving.exclude_input_in_output: false → the prompt comes back in front unless the request says otherwise."""
    assert (
        _infer(server, "pt-echo", _inputs(), ["text_output"])["text_output"][0].decode()
        == PROMPT + PROMPT[:12]
    )
    said = _inputs(sampling_param_exclude_input_from_output=np.array([True]))
    assert (
        _infer(server, "pt-echo", said, ["text_output"])["text_output"][0].decode() == PROMPT[:12]
    )
    assert (
        _infer(server, "pt", _inputs(), ["text_output"])["text_output"][0].decode() == PROMPT[:12]
    )


def test_the_frontends_lora_files_resolve_only_from_the_repository(server, tmp_path, monkeypatch):
    """multi_lora.json's paths are relative to the repository (the frontend refuses absolute ones) and the frontend
    loads them relative to its working directory (clients.json openai_frontend.lora loaded_from): started anywhere
    but the repository, its first LoRA request finds no files. The README says to start it there."""
    import os

    facts = CLIENTS["openai_frontend"]["lora"]
    table = json.loads((server.repo / "pt-lora_openai" / "1" / "multi_lora.json").read_text())
    monkeypatch.chdir(tmp_path)
    assert not any(
        os.path.exists(os.path.join(rel, f)) for rel in table.values() for f in facts["files"]
    )
    monkeypatch.chdir(server.repo)
    assert all(
        os.path.exists(os.path.join(rel, f)) for rel in table.values() for f in facts["files"]
    )


def test_genai_perfs_extra_inputs_of_the_ensembles_sampling_names_reach_the_llm_apis_sampling_params(
    server,
):
    """--extra-inputs k:v adds any input (clients.json genai_perf note): the ensemble's repetition_penalty,
    length_penalty, end_id, pad_id and bad_words are taken by <name>_openai and become the SamplingParams fields of
    those names (facts/llm_args.json request.sampling_params.fields; bad a list of strings)."""
    extra = {
        "repetition_penalty": np.array([[1.25]], np.float32),
        "length_penalty": np.array([[0.5]], np.float32),
        "end_id": np.array([[2]], np.int32),
        "pad_id": np.array([[0]], np.int32),
        "bad_words": np.array([[b"zz", b"yy"]], np.object_),
    }
    inputs = {**_request(CLIENTS["genai_perf"]["default"], PROMPT, max_tokens=12), **extra}
    got = _infer(server, "pt_openai", inputs, ["text_output"])
    assert got["text_output"].reshape(-1)[0].decode() == PROMPT[:12]
    passed = json.loads(
        (server.repo / "pt" / "1" / "tensorrt_llm" / "last_sampling.json").read_text()
    )
    assert {
        k: passed[k] for k in ("repetition_penalty", "length_penalty", "end_id", "pad_id", "bad")
    } == {
        "repetition_penalty": 1.25,
        "length_penalty": 0.5,
        "end_id": 2,
        "pad_id": 0,
        "bad": ["zz", "yy"],
    }


def test_the_recipes_tokenizer_and_add_special_tokens_reach_the_llm_api(server, tmp_path):
    """A checkpoint without tokenizer files and `tokenizer: DIR`: the tokenizer is packaged and LLM() loads it
    (facts/trtllm_llmapi.json tokenizer: without it the LLM is built without one and a text prompt fails), and
    serving.add_special_tokens false reaches every request's SamplingParams.add_special_tokens."""
    from click.testing import CliRunner

    from tritonbuild.backends.llm.checkpoint import TOKENIZER_FILES
    from tritonbuild.cli import main

    shutil.copytree(EXAMPLES / "tiny-llama", tmp_path / "ckpt")
    (tmp_path / "tok").mkdir()
    for name in TOKENIZER_FILES:
        if (tmp_path / "ckpt" / name).is_file():
            shutil.move(tmp_path / "ckpt" / name, tmp_path / "tok" / name)
    text = llmapi_recipe(
        (EXAMPLES / "tiny-llama-int4.yaml")
        .read_text()
        .replace("quantization: int4_weight_only", "quantization: none\nruntime: pytorch")
    )
    text = (
        text.replace("name: tiny-llama\n", "name: pt-tok\n")
        .replace("checkpoint: {path: tiny-llama}", "checkpoint: {path: ckpt}\ntokenizer: tok")
        .replace("serving:\n", "serving:\n  add_special_tokens: false\n")
    )
    (tmp_path / "pt-tok.yaml").write_text(text)
    r = CliRunner().invoke(
        main, ["build", str(tmp_path / "pt-tok.yaml"), "-o", str(tmp_path / "OUT")]
    )
    assert r.exit_code == 0, r.stderr
    shutil.copytree(
        tmp_path / "OUT",
        server.repo,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("tritonbuild-*"),
    )
    _fake(server.repo / "pt-tok" / "1")
    server.load("pt-tok")
    got = _infer(server, "pt-tok", _inputs(), ["text_output"])
    assert got["text_output"][0].decode() == PROMPT[:12]
    passed = json.loads(
        (server.repo / "pt-tok" / "1" / "tensorrt_llm" / "last_sampling.json").read_text()
    )
    assert passed["add_special_tokens"] is False
    _infer(server, "pt", _inputs(), ["text_output"])
    plain = json.loads(
        (server.repo / "pt" / "1" / "tensorrt_llm" / "last_sampling.json").read_text()
    )
    assert "add_special_tokens" not in plain  # the recipe's default is upstream's (true)
