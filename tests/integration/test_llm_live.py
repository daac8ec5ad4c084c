"""The generated LLM group live in the embedded tritonserver: preprocessing, postprocessing, the ensemble and
the BLS model run for real with a tokenizer trained here. Only the tensorrtllm C++ backend (GPU) is replaced,
by a stand-in that runs on the generated tensorrt_llm config as it is and enforces the backend's recorded
contract (tests/fixtures/llm/tensorrt_llm_standin.py: unguarded parameters, gpt_model_type, engine path,
streaming only when decoupled). Requests are the exact input sets of Triton's OpenAI frontend and genai-perf
(tests/contracts/facts/clients.json), streaming included."""

from __future__ import annotations

import importlib.util
import json
import queue
import shutil
from functools import partial

import numpy as np
import pytest

from tests.conftest import EXAMPLES, ROOT
from tests.contracts.facts import load, template
from tritonbuild.backends.tensorrtllm import tensors
from tritonbuild.server.embedded import EmbeddedServer
from tritonbuild.server.loading import ModelLoadError
from tritonbuild.triton.config import parse, render

pytestmark = [pytest.mark.triton, pytest.mark.slow]
ENGINE = ROOT / "tests" / "fixtures" / "engines" / "tiny-llama-w4a16"
LORA_ENGINE = ROOT / "tests" / "fixtures" / "engines" / "tiny-llama-w4a16-lora"
STANDIN = ROOT / "tests" / "fixtures" / "llm" / "tensorrt_llm_standin.py"
CORPUS = [
    "Recipes become repositories.",
    "Repositories become servers.",
    "Servers answer requests quickly.",
    "Every answer is checked against its golden bytes.",
]
TEXTS = ["Servers answer requests.", "Every recipe becomes a repository, checked."]
MULTIBYTE = (
    "Grüße aus Köln — 東京 ✓"  # bytes the corpus never saw: byte-level tokens split the characters
)
CLIENTS = load("clients")
TOKEN_DELAY_S = 0.05  # the streaming stand-in's time per token
NP = {
    "object": np.object_,
    "bool": np.bool_,
    "int32": np.int32,
    "uint64": np.uint64,
    "float32": np.float32,
}


def _train_tokenizer(dest):
    spec = importlib.util.spec_from_file_location(
        "mk", EXAMPLES / "tiny-llama" / "make_checkpoint.py"
    )
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    mk.CORPUS = CORPUS
    tok = mk.train_tokenizer(300)
    (dest / "tokenizer.json").write_text(tok.to_str())
    return tok


def _standin(trt_dir, contract: dict) -> None:
    mc = parse((trt_dir / "config.pbtxt").read_bytes())
    mc.backend = "python"  # parameters and tensors stay exactly as generated
    (trt_dir / "config.pbtxt").write_bytes(render(mc))
    shutil.copy(STANDIN, trt_dir / "1" / "model.py")
    (trt_dir / "1" / "contract.json").write_text(json.dumps(contract))


def _variant(repo, model: str, name: str, edit) -> None:
    """A copy of a generated model under another name, its config edited by hand."""
    shutil.copytree(repo / model, repo / name)
    mc = parse((repo / name / "config.pbtxt").read_bytes())
    mc.name = name
    edit(mc)
    (repo / name / "config.pbtxt").write_bytes(render(mc))


def _wider_window(mc) -> None:
    mc.parameters[
        "lookahead_window_size"
    ].string_value = "5"  # W the engine's max_draft_len was not built for


def _lookahead_engine(work, w: int, n: int, g: int):
    """The fixture engine's files with config.json recording a lookahead build (trtllm_speculative.json)."""
    facts = load("trtllm_speculative")
    engine = work / "lookahead-engine"
    shutil.copytree(ENGINE, engine)
    cfg = json.loads((engine / "config.json").read_text())
    mode = next(
        int(k) for k, v in facts["engine_config"]["values"].items() if v == "lookahead_decoding"
    )
    draft_len = eval(
        facts["lookahead"]["max_draft_len"]["formula_python"], {}, {"w": w, "n": n, "g": g}
    )
    seq = eval(
        facts["draft_limits"]["max_seq_len"]["formula_python"],
        {},
        {  # trtllm-build adds the draft length
            "max_seq_len": cfg["build_config"]["max_seq_len"],
            "max_draft_len": draft_len,
        },
    )
    cfg["build_config"].update(
        speculative_decoding_mode=mode, max_draft_len=draft_len, max_seq_len=seq
    )
    (engine / "config.json").write_text(json.dumps(cfg))
    return engine


def _train_sentencepiece(dest):
    """A byte-fallback BPE sentencepiece model (as Llama-2's tokenizer.model is) written to dest/tokenizer.model."""
    import io

    import sentencepiece

    buf = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS * 20),
        model_writer=buf,
        vocab_size=300,
        model_type="bpe",
        byte_fallback=True,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        minloglevel=2,
    )
    dest.mkdir()
    (dest / "tokenizer.model").write_bytes(buf.getvalue())
    return sentencepiece.SentencePieceProcessor(model_proto=buf.getvalue())


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    from click.testing import CliRunner

    from tritonbuild.cli import main

    work = tmp_path_factory.mktemp("llm")
    repo = work / "REPO"
    shutil.copytree(EXAMPLES / "tiny-llama", work / "tiny-llama")
    tok = _train_tokenizer(work / "tiny-llama")
    text = (
        (EXAMPLES / "tiny-llama-int4.yaml")
        .read_text()
        .replace("repository_mount: /models", f"repository_mount: {repo}")
    )
    (work / "llm.yaml").write_text(text)
    stream = text.replace("name: tiny-llama\n", "name: tiny-stream\n").replace(
        "streaming: false", "streaming: true"
    )
    (work / "stream.yaml").write_text(stream)
    spm = _train_sentencepiece(work / "spm-tokenizer")  # a tokenizer.model alone, no tokenizer.json
    (work / "spm.yaml").write_text(
        text.replace("name: tiny-llama\n", "name: tiny-spm\ntokenizer: spm-tokenizer\n")
    )
    guided = text.replace("name: tiny-llama\n", "name: tiny-guided\n").replace(
        "  streaming: false\n", "  streaming: false\n  guided_decoding: {backend: xgrammar}\n"
    )
    (work / "guided.yaml").write_text(guided)
    for lora in (
        "fr",
        "de",
    ):  # TensorRT-LLM's converted adapter files, as the OpenAI frontend np.loads them
        (work / f"{lora}-lora").mkdir()
        np.save(work / f"{lora}-lora" / "model.lora_weights.npy", np.ones((1, 2, 16), np.float16))
        np.save(
            work / f"{lora}-lora" / "model.lora_config.npy",
            np.array([[[1, 0, 8], [2, 0, 8]]], np.int32),
        )
    (work / "lora.yaml").write_text(
        text.replace("name: tiny-llama\n", "name: tiny-lora\n") + "lora:\n"
        "  adapters: {fr: fr-lora, de: de-lora}\n  target_modules: [attn_q, attn_v]\n"
    )
    lookahead = (
        "speculative: {mode: lookahead, window_size: 4, ngram_size: 3, verification_set_size: 2}\n"
    )
    (work / "lookahead.yaml").write_text(
        text.replace("name: tiny-llama\n", "name: tiny-lookahead\n") + lookahead
    )
    lookahead_engine = _lookahead_engine(work, 4, 3, 2)
    for recipe, name in (
        ("llm.yaml", "tiny-llama"),
        ("stream.yaml", "tiny-stream"),
        ("spm.yaml", "tiny-spm"),
        ("guided.yaml", "tiny-guided"),
        ("lora.yaml", "tiny-lora"),
        ("lookahead.yaml", "tiny-lookahead"),
    ):
        engine = {"tiny-lora": LORA_ENGINE, "tiny-lookahead": lookahead_engine}.get(name, ENGINE)
        r = CliRunner().invoke(
            main,
            [
                "build",
                str(work / recipe),
                "-o",
                str(work / recipe[:-5]),
                "--engine",
                f"{name}={engine}",
            ],
            catch_exceptions=False,
        )
        assert r.exit_code == 0, r.stderr
        shutil.copytree(
            work / recipe[:-5],
            repo,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("tritonbuild-manifest.json"),
        )
    facts = load("tensorrtllm_backend")
    contract = {
        **facts["cpp_parameters"],
        "perf_metrics": facts["perf_metrics"],
        "guided_decoding": facts["guided_decoding"],
        "speculative": load("trtllm_speculative"),
    }
    _standin(repo / "tiny-llama_tensorrt_llm", contract)
    _standin(repo / "tiny-stream_tensorrt_llm", {**contract, "token_delay_s": TOKEN_DELAY_S})
    _standin(repo / "tiny-spm_tensorrt_llm", contract)
    _standin(repo / "tiny-guided_tensorrt_llm", contract)
    _standin(repo / "tiny-lora_tensorrt_llm", contract)
    _standin(repo / "tiny-lookahead_tensorrt_llm", contract)
    _variant(
        repo,
        "tiny-lookahead_tensorrt_llm",
        "nongram_tensorrt_llm",
        lambda mc: mc.parameters.pop("lookahead_ngram_size"),
    )
    _variant(repo, "tiny-lookahead_tensorrt_llm", "wider_tensorrt_llm", _wider_window)
    # the same model without one unguarded parameter: what every generated repository was before #9
    _variant(
        repo,
        "tiny-llama_tensorrt_llm",
        "broken_tensorrt_llm",
        lambda mc: mc.parameters.pop("tokenizer_dir"),
    )
    with EmbeddedServer(repo) as server:
        for name in (
            "tiny-llama",
            "tiny-stream",
            "tiny-spm",
            "tiny-guided",
            "tiny-lora",
            "tiny-lookahead",
        ):
            for m in (
                f"{name}_preprocessing",
                f"{name}_tensorrt_llm",
                f"{name}_postprocessing",
                name,
                f"{name}_bls",
            ):
                server.load(m)
        server.spm = spm
        server.repo = repo
        yield server, tok
        # kept under pytest's basetemp (its last three runs): a test that failed under CI's load once (the
        # streaming BLS, 2026-12-06) left nothing to read
        shutil.copyfile(server.log_path, work / "tritonserver.log")


def _infer(server, model, inputs: dict, outputs: list[str]):
    import tritonclient.http as http
    from tritonclient.utils import np_to_triton_dtype

    client = http.InferenceServerClient(server.http_url)
    reqs = []
    for name, arr in inputs.items():
        i = http.InferInput(name, list(arr.shape), np_to_triton_dtype(arr.dtype))
        i.set_data_from_numpy(arr)
        reqs.append(i)
    res = client.infer(model, reqs, outputs=[http.InferRequestedOutput(o) for o in outputs])
    return {o: res.as_numpy(o) for o in outputs}


def _stream(server, model, inputs: dict) -> list[dict]:
    """gRPC bidirectional stream, as genai-perf --streaming and the OpenAI frontend's streaming use."""
    import tritonclient.grpc as grpc
    from tritonclient.utils import np_to_triton_dtype

    got: queue.Queue = queue.Queue()
    client = grpc.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=partial(lambda q, result, error: q.put((result, error)), got))
    reqs = []
    for name, arr in inputs.items():
        i = grpc.InferInput(name, list(arr.shape), np_to_triton_dtype(arr.dtype))
        i.set_data_from_numpy(arr)
        reqs.append(i)
    client.async_stream_infer(model, reqs, enable_empty_final_response=True)
    out = []
    while True:
        result, error = got.get(timeout=60)
        assert error is None, error
        resp = result.get_response()
        if resp.outputs:
            out.append({o.name: result.as_numpy(o.name) for o in resp.outputs})
        if (
            resp.parameters.get("triton_final_response")
            and resp.parameters["triton_final_response"].bool_param
        ):
            break
    client.stop_stream()
    client.close()
    return out


def _request(kind: dict, text: str, **overrides) -> dict:
    """One request of a client's recorded input set (name → (dtype, shape)), with representative values."""
    values = {
        "text_input": text.encode(),
        "max_tokens": 64,
        "stream": False,
        "return_num_input_tokens": True,
        "return_num_output_tokens": True,
        "top_p": 0.9,
        "temperature": 0.7,
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
        "seed": 7,
        "exclude_input_in_output": True,
        "stop_words": b"zzz",
        "min_length": 64,
    }
    values.update(overrides)
    out = {}
    for name, (dtype, shape) in kind.items():
        shape = [1 if d == -1 else d for d in shape]
        out[name] = np.full(shape, values[name], dtype=NP[dtype])
    return out


def _text_inputs(texts, max_tokens=64, **extra):
    d = {
        "text_input": np.array([[t.encode()] for t in texts], dtype=np.object_),
        "max_tokens": np.full((len(texts), 1), max_tokens, dtype=np.int32),
    }
    d.update({k: np.full((len(texts), 1), v) for k, v in extra.items()})
    return d


def test_a_missing_unguarded_parameter_fails_the_load_with_upstreams_message(group):
    server, _ = group
    with pytest.raises(ModelLoadError, match="Cannot find parameter with name: tokenizer_dir"):
        server.load("broken_tensorrt_llm")


def test_a_lookahead_model_is_answered_and_its_parameters_are_held_to_the_backends_reads(group):
    """decoding_mode lookahead with the three lookahead_* parameters loads and answers through the ensemble; without
    one the load fails with upstream's message, with a W the engine's max_draft_len was not built for it fails."""
    server, _ = group
    got = _infer(server, "tiny-lookahead", _text_inputs(TEXTS[:1]), ["text_output"])
    assert got["text_output"].shape[0] == 1
    with pytest.raises(ModelLoadError, match="lookahead parameters are not specified"):
        server.load("nongram_tensorrt_llm")
    with pytest.raises(ModelLoadError, match="needs an engine of max_draft_len"):
        server.load("wider_tensorrt_llm")


def test_preprocessing_tokenizes_with_the_packaged_tokenizer(group):
    server, tok = group
    got = _infer(
        server,
        "tiny-llama_preprocessing",
        {
            **_text_inputs(TEXTS[:1]),
            "stop_words": np.array([[b"answer", b"Servers"]], dtype=np.object_),
        },
        ["input_ids", "input_lengths", "request_output_len", "end_id", "pad_id", "stop_words_list"],
    )
    expected = tok.encode(TEXTS[0]).ids
    assert got["input_ids"].tolist() == [expected]
    assert got["input_lengths"].tolist() == [[len(expected)]] and got[
        "request_output_len"
    ].tolist() == [[64]]
    assert got["end_id"].tolist() == [[tok.token_to_id("</s>")]]
    a, s = tok.encode("answer").ids, tok.encode("Servers").ids
    words = got["stop_words_list"][0]
    assert words[0, : len(a + s)].tolist() == a + s and words[1, :2].tolist() == [
        len(a),
        len(a + s),
    ]


def test_postprocessing_detokenizes(group):
    server, tok = group
    ids = np.array([[tok.encode(TEXTS[1]).ids]], dtype=np.int32)
    got = _infer(
        server,
        "tiny-llama_postprocessing",
        {"tokens_batch": ids, "sequence_length": np.array([[ids.shape[-1]]], dtype=np.int32)},
        ["output"],
    )
    assert got["output"].reshape(-1)[0] == TEXTS[1].encode()


@pytest.mark.parametrize("entry", ["tiny-llama", "tiny-llama_bls"])
def test_text_round_trips_through_the_pipeline_bit_exact(group, entry):
    server, tok = group
    exclude = {"exclude_input_in_output": True}
    outs = [
        _infer(server, entry, _text_inputs(TEXTS[:1], **exclude), ["text_output"])["text_output"]
        for _ in range(5)
    ]
    assert [o.reshape(-1).tolist() for o in outs] == [
        [TEXTS[0].encode()]
    ] * 5  # same bytes every time
    batch = _infer(server, entry, _text_inputs(TEXTS, **exclude), ["text_output"])["text_output"]
    assert batch.reshape(-1).tolist() == [t.encode() for t in TEXTS]
    echoed = _infer(
        server, entry, _text_inputs(TEXTS[:1], exclude_input_in_output=False), ["text_output"]
    )["text_output"]  # a completions request with echo: true
    ids = tok.encode(TEXTS[0]).ids
    assert echoed.reshape(-1)[0] == tok.decode(ids + ids).encode()


@pytest.mark.parametrize(
    "entry", ["tiny-llama", "tiny-llama_bls", "tiny-stream", "tiny-stream_bls"]
)
@pytest.mark.parametrize(
    "client", ["openai", "openai+options", "genai-perf", "genai-perf --deterministic"]
)
def test_upstream_clients_non_streaming_requests_get_200(group, entry, client):
    """Each recorded client input set is answered with the completion alone: a chat request ("openai", which
    carries no exclude_input_in_output) included, as genai-perf and triton_cli ask for it."""
    server, tok = group
    kind = {
        "openai": CLIENTS["openai_frontend"]["always"],
        "genai-perf": CLIENTS["genai_perf"]["default"],
        "genai-perf --deterministic": CLIENTS["genai_perf"]["deterministic"],
        "openai+options": {
            **CLIENTS["openai_frontend"]["always"],
            **{
                k: v
                for k, v in CLIENTS["openai_frontend"]["optional"].items()
                if not k.startswith(("guided_", "lora_"))
            },
        },
    }[client]
    inputs = _request(kind, TEXTS[0])
    wanted = ["text_output"] + (
        ["num_input_tokens", "num_output_tokens"] if "return_num_input_tokens" in kind else []
    )
    if entry.startswith("tiny-stream"):
        (got,) = _stream(server, entry, inputs)
    else:
        got = _infer(server, entry, inputs, wanted)
    n = len(tok.encode(TEXTS[0]).ids)
    assert (
        got["text_output"].reshape(-1)[0] == TEXTS[0].encode()
    )  # the stand-in's completion, no prompt
    if "num_input_tokens" in wanted:
        assert got["num_input_tokens"].reshape(-1).tolist() == [n]
        assert got["num_output_tokens"].reshape(-1).tolist() == [n]


@pytest.mark.parametrize("entry", ["tiny-stream", "tiny-stream_bls"])
@pytest.mark.parametrize("client", ["openai", "genai-perf --streaming"])
def test_streaming_requests_stream_token_by_token(group, entry, client):
    server, _tok = group
    kind = (
        CLIENTS["openai_frontend"]["always"]
        if client == "openai"
        else CLIENTS["genai_perf"]["streaming"]
    )
    text = TEXTS[0] if entry == "tiny-stream" else MULTIBYTE
    responses = _stream(server, entry, _request(kind, text, stream=True))
    pieces = [r["text_output"].reshape(-1)[0] for r in responses]
    assert len(pieces) > 1
    assert b"".join(pieces) == text.encode()
    if entry == "tiny-stream_bls":
        assert all(p.decode("utf-8") and "\ufffd" not in p.decode("utf-8") for p in pieces)


def test_streaming_against_a_non_decoupled_model_is_refused_with_upstreams_message(group):
    import tritonclient.http as http

    server, _ = group
    with pytest.raises(
        Exception, match="Streaming is only supported if model is deployed using decoupled mode"
    ):
        _infer(
            server,
            "tiny-llama",
            _request(CLIENTS["genai_perf"]["streaming"], TEXTS[0], stream=True),
            ["text_output"],
        )
    assert http  # the HTTP client raised, not the test


def test_the_streaming_bls_keeps_concurrent_requests_in_flight(group):
    """One BLS instance, four concurrent streamed requests: they overlap (each on its own thread), instead of
    queueing behind each other as a one-request-at-a-time execute() would."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    server, tok = group
    inputs = _request(CLIENTS["genai_perf"]["streaming"], TEXTS[1], stream=True)
    one = len(tok.encode(TEXTS[1]).ids) * TOKEN_DELAY_S
    start = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: _stream(server, "tiny-stream_bls", inputs), range(4)))
    wall = time.monotonic() - start
    assert all(
        b"".join(r["text_output"].reshape(-1)[0] for r in res) == TEXTS[1].encode()
        for res in results
    )
    assert wall < 2.5 * one, (
        f"4 requests took {wall:.2f}s, one takes {one:.2f}s: they were serialised"
    )


# inputs upstream's BLS template reshapes to scalars (its decoder re-expands them to [batch, 1] for tensorrt_llm),
# of those the generated group declares (LoRA and draft logits are not generated)
BLS_SCALAR_INPUTS = [
    t
    for t in template("tensorrt_llm_bls")["inputs"]
    if t.get("reshape") == [] and t["name"] in {name for name, *_ in tensors.REQUEST_INPUTS}
]
ON_REQUEST = {
    "return_log_probs": ["cum_log_probs", "output_log_probs"],
    "return_context_logits": ["context_logits"],
    "return_generation_logits": ["generation_logits"],
    "num_return_sequences": [],
    "return_perf_metrics": list(load("tensorrtllm_backend")["perf_metrics"]["outputs"]),
}


@pytest.mark.parametrize("entry", ["tiny-llama", "tiny-llama_bls", "tiny-stream_bls"])
@pytest.mark.parametrize("spec", BLS_SCALAR_INPUTS, ids=lambda t: t["name"])
def test_the_inputs_upstreams_bls_reshapes_are_answered(group, entry, spec):
    """Each input upstream's BLS template declares with reshape [] reaches tensorrt_llm as [batch, 1] (Triton
    checks dims before reshape) and the outputs it asks for come back, from the ensemble and the BLS alike."""
    assert len(BLS_SCALAR_INPUTS) == 5
    server, tok = group
    value = np.array(
        [[1 if spec["data_type"] == "TYPE_INT32" else True]],
        dtype=np.int32 if spec["data_type"] == "TYPE_INT32" else np.bool_,
    )
    inputs = {**_text_inputs(TEXTS[:1], exclude_input_in_output=True), spec["name"]: value}
    wanted = ["text_output", *ON_REQUEST[spec["name"]]]
    got = (
        _stream(server, entry, inputs)[0]
        if entry.startswith("tiny-stream")
        else _infer(server, entry, inputs, wanted)
    )
    assert got["text_output"].reshape(-1)[0] == TEXTS[0].encode()
    n = len(tok.encode(TEXTS[0]).ids)
    for name in ON_REQUEST[spec["name"]]:
        assert name in got, f"{entry} did not return {name}"
        if name == "context_logits":
            assert got[name].shape == (1, n, 384)  # [batch, prompt tokens, the engine's vocab_size]
    if (
        spec["name"] == "return_perf_metrics"
    ):  # upstream's timestamps are ordered, the KV blocks hold the tokens
        t = [
            int(got[k].reshape(-1)[0])
            for k in (
                "arrival_time_ns",
                "first_scheduled_time_ns",
                "first_token_time_ns",
                "last_token_time_ns",
            )
        ]
        assert 0 < t[0] <= t[1] <= t[2] <= t[3]
        assert (
            got["kv_cache_alloc_total_blocks"].reshape(-1)[0] >= 1
            and got["acceptance_rate"].dtype == np.float32
        )


@pytest.mark.parametrize("entry", ["tiny-spm", "tiny-spm_bls"])
def test_a_sentencepiece_only_tokenizer_serves(group, entry):
    """A checkpoint with tokenizer.model and no tokenizer.json (upstream's AutoTokenizer takes it): the prompt is
    tokenized by sentencepiece, BOS first, and the completion decodes back to the text, multi-byte included."""
    server, _ = group
    sp = server.spm
    got = _infer(
        server, "tiny-spm_preprocessing", _text_inputs([MULTIBYTE]), ["input_ids", "end_id"]
    )
    assert got["input_ids"].tolist() == [[sp.bos_id(), *sp.encode(MULTIBYTE)]]
    assert got["end_id"].tolist() == [[sp.eos_id()]]
    out = _infer(server, entry, _text_inputs([TEXTS[0], MULTIBYTE]), ["text_output"])["text_output"]
    assert out.reshape(-1).tolist() == [TEXTS[0].encode(), MULTIBYTE.encode()]


@pytest.mark.parametrize("entry", ["tiny-guided", "tiny-guided_bls"])
def test_the_openai_frontends_tool_choice_request_is_answered_where_guided_decoding_is_on(
    group, entry
):
    """tool_choice "required" makes the frontend send a json_schema guide (clients.json); a recipe with
    serving.guided_decoding answers it (the stand-in loaded the generated xgrammar tokenizer info as upstream's
    C++ code reads it); the plain model, which declares no guide inputs, refuses it with a 400."""
    server, _tok = group
    kind = {
        **CLIENTS["openai_frontend"]["always"],
        **{
            k: v
            for k, v in CLIENTS["openai_frontend"]["optional"].items()
            if k.startswith("guided_")
        },
    }
    tool = CLIENTS["openai_frontend"]["tool_choice_guide"]
    schema = json.dumps({"type": "object", "properties": {"city": {"type": "string"}}}).encode()
    inputs = _request(
        kind,
        TEXTS[0],
        guided_decoding_guide_type=tool["guided_decoding_guide_type"].encode(),
        guided_decoding_guide=schema,
    )
    got = _infer(server, entry, inputs, ["text_output", "num_input_tokens"])
    assert got["text_output"].reshape(-1)[0] == TEXTS[0].encode()
    with pytest.raises(
        Exception, match="unexpected inference input 'guided_decoding_guide"
    ):  # 400 at the door
        _infer(server, entry.replace("tiny-guided", "tiny-llama"), inputs, ["text_output"])


def _frontend_loras(repo, model) -> dict:
    """What Triton's OpenAI frontend finds for a model (clients.json openai_frontend.lora): multi_lora.json in its
    version directory, each path relative to the repository, inside it, holding the two .npy files, which it then
    loads relative to its working directory (loaded_from): here, as there, run in the repository; task ids from 1
    in file order."""
    import contextlib
    import os

    facts = CLIENTS["openai_frontend"]["lora"]
    table = repo / model / "1" / "multi_lora.json"
    if not table.is_file():
        return {}
    out = {}
    for task_id, (name, rel) in enumerate(
        json.loads(table.read_text()).items(), start=facts["first_task_id"]
    ):
        assert not os.path.isabs(rel), rel
        real = os.path.realpath(repo / rel)
        assert os.path.commonpath([os.path.realpath(repo), real]) == os.path.realpath(repo), rel
        assert all(os.path.exists(os.path.join(real, f)) for f in facts["files"]), rel
        with contextlib.chdir(
            repo
        ):  # np.load(os.path.join(path, file)) with the path as the table writes it
            out[name] = (task_id, *[np.load(os.path.join(rel, f)) for f in facts["files"]])
    return out


@pytest.mark.parametrize("entry", ["tiny-lora", "tiny-lora_bls"])
def test_the_openai_frontends_lora_request_is_answered(group, entry):
    """The frontend's request for <model>/<lora>: lora_task_id with the adapter's weights and config on first use,
    the task id alone after; the same request to a model without adapters is refused (400, as on main)."""
    server, _tok = group
    loras = _frontend_loras(server.repo, entry)
    assert set(loras) == {"fr", "de"}
    task_id, weights, config = loras["de"]
    kind = CLIENTS["openai_frontend"]["always"]
    first = {
        **_request(kind, TEXTS[0]),
        "lora_task_id": np.array([[task_id]], np.uint64),
        "lora_weights": weights,
        "lora_config": config,
    }
    for inputs in (
        first,
        {**_request(kind, TEXTS[0]), "lora_task_id": np.array([[task_id]], np.uint64)},
    ):
        got = _infer(server, entry, inputs, ["text_output"])
        assert got["text_output"].reshape(-1)[0] == TEXTS[0].encode()
    with pytest.raises(Exception, match="not found in cache"):  # a task the backend never saw
        _infer(
            server,
            entry,
            {**_request(kind, TEXTS[0]), "lora_task_id": np.array([[99]], np.uint64)},
            ["text_output"],
        )
    assert _frontend_loras(server.repo, "tiny-llama") == {}
    with pytest.raises(Exception, match="unexpected inference input 'lora_"):
        _infer(server, entry.replace("tiny-lora", "tiny-llama"), first, ["text_output"])
