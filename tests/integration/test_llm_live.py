"""The generated LLM group live in the embedded tritonserver: preprocessing, postprocessing, the ensemble and
the BLS model run for real with a tokenizer trained here; only tensorrt_llm (a GPU C++ backend) is replaced
by a stand-in with the same inputs and outputs (tests/fixtures/llm/echo_tensorrt_llm.py)."""

from __future__ import annotations

import importlib.util
import shutil

import numpy as np
import pytest

from tests.conftest import EXAMPLES, ROOT
from tritonbuild.repository.config import parse, render
from tritonbuild.server.embedded import EmbeddedServer

pytestmark = [pytest.mark.triton, pytest.mark.slow]
ENGINE = ROOT / "tests" / "fixtures" / "engines" / "tiny-llama-w4a16"
CORPUS = ["Recipes become repositories.", "Repositories become servers.", "Servers answer requests quickly.",
          "Every answer is checked against its golden bytes."]
TEXTS = ["Servers answer requests.", "Every recipe becomes a repository, checked."]


def _train_tokenizer(dest):
    spec = importlib.util.spec_from_file_location("mk", EXAMPLES / "tiny-llama" / "make_checkpoint.py")
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    mk.CORPUS = CORPUS
    tok = mk.train_tokenizer(300)
    (dest / "tokenizer.json").write_text(tok.to_str())
    return tok


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    from click.testing import CliRunner

    from tritonbuild.cli import main

    work = tmp_path_factory.mktemp("llm")
    shutil.copytree(EXAMPLES / "tiny-llama", work / "tiny-llama")
    shutil.copy(EXAMPLES / "tiny-llama-int4.yaml", work / "llm.yaml")
    tok = _train_tokenizer(work / "tiny-llama")
    out = work / "OUT"
    r = CliRunner().invoke(main, ["build", str(work / "llm.yaml"), "-o", str(out), "--engine",
                                  f"tiny-llama={ENGINE}"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    trt = out / "tiny-llama_tensorrt_llm"
    mc = parse((trt / "config.pbtxt").read_bytes())
    mc.backend = "python"
    mc.ClearField("parameters")
    (trt / "config.pbtxt").write_bytes(render(mc))
    shutil.rmtree(trt / "1" / "engine")
    shutil.copy(ROOT / "tests" / "fixtures" / "llm" / "echo_tensorrt_llm.py", trt / "1" / "model.py")
    with EmbeddedServer(out) as server:
        for m in ("tiny-llama_preprocessing", "tiny-llama_tensorrt_llm", "tiny-llama_postprocessing",
                  "tiny-llama", "tiny-llama_bls"):
            server.load(m)
        yield server, tok


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


def _text_inputs(texts, max_tokens=16):
    return {"text_input": np.array([[t.encode()] for t in texts], dtype=np.object_),
            "max_tokens": np.full((len(texts), 1), max_tokens, dtype=np.int32)}


def test_preprocessing_tokenizes_with_the_packaged_tokenizer(group):
    server, tok = group
    got = _infer(server, "tiny-llama_preprocessing", _text_inputs(TEXTS[:1]),
                 ["input_ids", "input_lengths", "request_output_len", "end_id", "pad_id"])
    expected = tok.encode(TEXTS[0]).ids
    assert got["input_ids"].tolist() == [expected]
    assert got["input_lengths"].tolist() == [[len(expected)]] and got["request_output_len"].tolist() == [[16]]
    assert got["end_id"].tolist() == [[tok.token_to_id("</s>")]]


def test_postprocessing_detokenizes(group):
    server, tok = group
    ids = np.array([[tok.encode(TEXTS[1]).ids]], dtype=np.int32)
    got = _infer(server, "tiny-llama_postprocessing",
                 {"tokens_batch": ids, "sequence_length": np.array([[ids.shape[-1]]], dtype=np.int32)}, ["output"])
    assert got["output"].reshape(-1)[0] == TEXTS[1].encode()


@pytest.mark.parametrize("entry", ["tiny-llama", "tiny-llama_bls"])
def test_text_round_trips_through_the_pipeline_bit_exact(group, entry):
    server, _ = group
    outs = [_infer(server, entry, _text_inputs(TEXTS[:1]), ["text_output"])["text_output"] for _ in range(5)]
    assert outs[0].reshape(-1)[0] == TEXTS[0].encode()
    assert [o.reshape(-1).tolist() for o in outs] == [[TEXTS[0].encode()]] * 5  # same bytes every time
    batch = _infer(server, entry, _text_inputs(TEXTS), ["text_output"])["text_output"]
    assert batch.reshape(-1).tolist() == [t.encode() for t in TEXTS]
