"""verify/traffic.py's paths on a runner that tokenizes like a small trained tokenizer (several tokens a word) and
refuses, as vLLM does, a prompt past max_model_len: the chunked-prefill prompt is sized from the tokens the model
reported for the first long prompt (on the 8B run a 640-word prompt became 2,049+ tokens and was refused), and a
refused path is told as not answered while the others still run."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np

from tritonbuild.verify import traffic
from tritonbuild.verify.runners import InferError

ENGINE = {"block_size": 16, "max_num_batched_tokens": 512, "max_model_len": 2048}
TEMPLATE = {
    "text_input": np.array([b"Triton serves"], dtype=np.object_),
    "sampling_parameters": np.array([json.dumps({"temperature": 0}).encode()], dtype=np.object_),
}


class Tokenizing:
    def __init__(self, per_word: int, max_len: int, refuse: str = ""):
        self.per_word, self.max_len, self.refuse, self.sent = per_word, max_len, refuse, []

    def infer(self, sample):
        text = sample["text_input"][0].decode()
        tokens = self.per_word * len(text.split(" "))
        self.sent.append(tokens)
        if tokens > self.max_len or (self.refuse and self.refuse in text):
            raise InferError(f"the prompt has {tokens} tokens, more than max_model_len")
        return {
            "text_output": np.array([b"x"], dtype=np.object_),
            "num_input_tokens": np.array([tokens]),
        }

    def infer_amid(self, sample, others):
        return self.infer(sample)

    def infer_concurrent(self, samples):
        return [self.infer(sample) for sample in samples]


def _paths(runner, engine=ENGINE):
    model = SimpleNamespace(llm={"engine_args": engine})
    return {p.name: p for p in traffic.Paths(model, runner, TEMPLATE, 3, lambda *a: []).run()}


def test_the_chunked_prefill_prompt_is_sized_from_the_models_own_token_count():
    runner = Tokenizing(per_word=4, max_len=2048)
    paths = _paths(runner)
    chunked = paths["chunked-prefill"]
    assert chunked.exercised and chunked.answers == 1, chunked.detail
    assert 512 < max(runner.sent) <= 2048 - traffic.LONG_DECODE_TOKENS


def test_no_room_for_a_prompt_past_the_budget_is_not_exercised_not_refused():
    runner = Tokenizing(per_word=4, max_len=2048)
    paths = _paths(runner, {**ENGINE, "max_model_len": 700})
    assert not paths["chunked-prefill"].exercised
    assert "leaves no room" in paths["chunked-prefill"].detail


def test_a_refused_path_is_told_and_the_others_still_run():
    runner = Tokenizing(per_word=4, max_len=2048, refuse="Question 2")
    paths = _paths(runner)
    assert list(paths) == [
        "prefix-cache",
        "shared-prefix",
        "chunked-prefill",
        "long-decode",
        "seeded-sampling",
    ]
    assert not paths["shared-prefix"].exercised
    assert paths["shared-prefix"].detail.startswith("not answered: ")
    assert paths["long-decode"].answers == 1 and paths["seeded-sampling"].answers == 2
