"""A generative model's check under load, without a server: the token-level account of what differed (ids or only
log-probs, first position) and the concurrency verify uses (verify.under_load, else the model's max_num_seqs). Answers
are written as Triton's vLLM backend writes its `logprobs` output (tests/contracts/facts/vllm_backend.json)."""

from __future__ import annotations

import json

import numpy as np

from tests.contracts.facts import load
from tritonbuild.recipe.models import UnderLoad, Verify
from tritonbuild.verify.generate import _filler, token_difference
from tritonbuild.verify.under_load import answers_under_load, load_settings

FORMAT = load("vllm_backend")["logprobs_output"]


def _answer(steps):
    fields = {"rank": 1, "decoded_token": "x"}
    assert set(FORMAT["fields"]) == {"logprob", *fields}
    # NOTE: token ids as ints, as vLLM hands them to the backend; json.dumps makes them string keys, as upstream's does
    text = json.dumps([{token: {**fields, "logprob": lp}} for token, lp in steps])
    return {
        "logprobs": np.array([text.encode()], dtype=np.object_),
        "text_output": np.array(["".join(str(t) for t, _ in steps).encode()], dtype=np.object_),
    }


def test_only_log_probs_differ():
    diff = token_difference(_answer([(5, -0.5), (7, -1.25)]), _answer([(5, -0.5), (7, -1.2500001)]))
    assert diff["ids_differ"] is False and diff["logprobs_differ"] is True
    assert (
        diff["first_position"] == 1 and diff["first_id_position"] is None and diff["positions"] == 1
    )


def test_token_ids_differ_from_a_position_on():
    diff = token_difference(
        _answer([(5, -0.5), (7, -1.0), (9, -2.0)]), _answer([(5, -0.5), (8, -1.1), (2, -3.0)])
    )
    assert diff["ids_differ"] is True and diff["first_id_position"] == 1 and diff["positions"] == 2


def test_an_output_without_log_probs_is_no_token_account():
    null = {"logprobs": np.array([b"null"], dtype=np.object_)}  # FORMAT["absent"]
    assert "null" in FORMAT["absent"] and token_difference(null, null) is None


def test_identical_answers_and_answers_without_log_probs():
    same = token_difference(_answer([(5, -0.5)]), _answer([(5, -0.5)]))
    assert (
        same["ids_differ"] is False
        and same["logprobs_differ"] is False
        and same["first_position"] is None
    )
    assert (
        token_difference({"text_output": np.array([b"a"], dtype=np.object_)}, _answer([(5, -0.5)]))
        is None
    )


def _model(verify: Verify, llm=None):
    return type("M", (), {"verify": verify, "llm": llm, "max_batch_size": 0})()


def test_concurrency_comes_from_the_recipe_else_the_models_max_num_seqs_capped():
    assert load_settings(_model(Verify())) == (63, 3)
    assert load_settings(_model(Verify(), {"engine_args": {"max_num_seqs": 8}})) == (7, 3)
    assert load_settings(_model(Verify(), {"engine_args": {"max_num_seqs": 1024}})) == (63, 3)
    assert load_settings(_model(Verify(under_load=UnderLoad(others=200, repeats=10)))) == (200, 10)


def test_fillers_are_other_prompts_of_other_lengths_not_streamed():
    sample = {
        "text_input": np.array([b"golden"], dtype=np.object_),
        "stream": np.array([True]),
        "sampling_parameters": np.array(
            [json.dumps({"max_tokens": 16, "temperature": 0}).encode()], dtype=np.object_
        ),
    }
    fillers = [_filler(sample, i) for i in range(8)]
    assert all(not f["stream"][0] and f["text_input"][0] != b"golden" for f in fillers)
    assert len({json.loads(f["sampling_parameters"][0])["max_tokens"] for f in fillers}) > 4
    assert all(json.loads(f["sampling_parameters"][0])["temperature"] == 0 for f in fillers)


class _Runner:
    """Answers alone as given; amid others, the answers a batch-dependent runtime gives."""

    def __init__(self, loaded):
        self.loaded, self.calls = loaded, []

    def infer_amid(self, sample, others):
        self.calls.append(others)
        return self.loaded


def test_a_loaded_answer_that_differs_is_counted_and_described():
    alone = [_answer([(5, -0.5), (7, -1.0)])]
    runner = _Runner(_answer([(5, -0.5), (7, -1.0000001)]))
    status, detail, found, summary = answers_under_load(
        _model(Verify(under_load=UnderLoad(others=4, repeats=2))), runner, [{}], alone
    )
    assert status == "variant" and runner.calls == [4, 4]
    assert (
        summary["answers"] == 2
        and summary["differing"] == 2
        and summary["logprobs_only_differing"] == 2
    )
    assert summary["first_differing_position"] == 1 and {m.output for m in found} == {"logprobs"}
    assert "only log-probs in 2" in detail and "first at generated token 1" in detail


def test_identical_loaded_answers_are_invariant():
    alone = [_answer([(5, -0.5)])]
    status, _detail, found, summary = answers_under_load(
        _model(Verify()), _Runner(_answer([(5, -0.5)])), [{}], alone
    )
    assert (
        status == "invariant"
        and not found
        and summary["differing"] == 0
        and summary["others"] == 63
    )
