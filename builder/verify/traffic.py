"""The paths real traffic takes through a generative model's runtime, each checked bit for bit: a
long prompt prefilled cold and then answered from the prefix cache, prompts sharing a long prefix in
flight together, a prompt longer than the step's token budget prefilled in chunks amid decoding
streams, a long decode under load, and seeded sampling under load. The golden requests (a few words,
a few tokens) take none of them.

Every prompt starts with a run nonce, so its prefill is cold on a server that answered earlier
runs; a path's answers are compared with each other (same prompt, same parameters), token ids and
log-probs apart, never with the goldens. Prompt lengths are set in tokens from the engine's own
settings (block size, token budget, context length) and checked after the fact against the number
of input tokens the model reports: a path the prompt did not reach is reported as not exercised.
Seeded sampling is measured and reported; it is outside what batch invariance promises (greedy
decoding), so it never fails the check."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field

import numpy as np

from tritonbuild.repository.manifest import ManifestModel
from tritonbuild.verify.models import Mismatch

Sample = dict[str, np.ndarray]
# Words a prompt is made of: ordinary English, one token or a little more each in a BPE vocabulary
SENTENCE = (
    "the server answers every request with the same tokens whatever else is running on the "
    "device so that an audit can replay a conversation and find each word and its probability "
    "exactly where it was before while new prompts arrive leave and share the cache"
)
WORDS = SENTENCE.split(" ")
BLOCKS_FOR_CACHE = 6  # a long prompt spans this many KV blocks
SHARED_PROMPTS = 4  # prompts sharing a prefix, in flight together
LONG_DECODE_TOKENS = 256
CHUNKED_FACTOR = 1.25  # the chunked-prefill prompt: this many times the token budget, in words
# tokens per word before the model's tokenizer was measured (BPE: about 1.3; a tokenizer trained on a few lines
# took about 3.7 on the 8B run's checkpoint: 362 tokens for 98 words, docs/runs/2026-12-06-llm-invariant-h100)
TOKENS_PER_WORD_MAX = 1.6
SAMPLING = {"temperature": 0.9, "top_p": 0.95, "seed": 1234}
DEFAULT_BLOCK = 16  # vLLM's default KV block size on CUDA


@dataclass
class Path:
    """One path's outcome: its name, what was sent, whether the prompt reached the path, the
    answers compared and which differed."""

    name: str
    detail: str
    exercised: bool = True
    required: bool = True
    answers: int = 0
    differing: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "path": self.name,
            "detail": self.detail,
            "exercised": self.exercised,
            "required": self.required,
            "answers": self.answers,
            "differing": self.differing,
            "differing_in": sorted({found.context.split(": ", 1)[-1] for found in self.mismatches}),
        }


def _engine(model: ManifestModel) -> dict:
    return (model.llm or {}).get("engine_args") or {}


def _text(nonce: str, words: int, tail: str = "") -> str:
    body = " ".join(WORDS[i % len(WORDS)] for i in range(words))
    return f"Run {nonce}. {body}{tail}"


def _request(template: Sample, text: str, **params) -> Sample:
    """template (a golden request) with another prompt and parameters, answered once (not
    streamed)."""
    sample = dict(template)
    sample["text_input"] = np.array([text.encode()], dtype=np.object_)
    if "stream" in sample:
        sample["stream"] = np.array([False])
    if "sampling_parameters" in sample:
        value = sample["sampling_parameters"].ravel()[0]
        old = json.loads(value.decode() if isinstance(value, bytes) else value)
        merged = {**old, **params}
        sample["sampling_parameters"] = np.array(
            [json.dumps(merged, sort_keys=True).encode()], dtype=np.object_
        )
    return sample


def _input_tokens(answer: Sample) -> int | None:
    value = answer.get("num_input_tokens")
    return int(np.asarray(value).ravel()[0]) if value is not None and value.size else None


class Paths:
    """The paths of one model, run on a runner with infer, infer_amid and infer_concurrent."""

    def __init__(self, model: ManifestModel, runner, template: Sample, others: int, differences):
        self.model, self.runner, self.template, self.others = model, runner, template, others
        self.differences = differences  # (alone, got, sample, context) -> [Mismatch]
        engine = _engine(model)
        self.block = int(engine.get("block_size") or DEFAULT_BLOCK)
        self.budget = engine.get("max_num_batched_tokens")
        self.max_len = engine.get("max_model_len")
        self.caching = engine.get("enable_prefix_caching", True) is not False
        self.nonce = secrets.token_hex(4)
        self.tokens_per_word: float | None = None  # measured on the first long prompt

    def _compare(self, path: Path, reference: Sample, got: Sample, context: str) -> None:
        path.answers += 1
        found = self.differences(reference, got, 0, f"{path.name}: {context}")
        if found:
            path.differing += 1
            path.mismatches += found

    def prefix_cache(self) -> Path:
        text = _text(self.nonce + "a", BLOCKS_FOR_CACHE * self.block)
        prompt = _request(self.template, text)
        cold = self.runner.infer(prompt)
        tokens = _input_tokens(cold)
        if tokens:  # the model's tokenizer on these words: sizes the chunked-prefill prompt
            self.tokens_per_word = tokens / len(text.split(" "))
        path = Path(
            "prefix-cache",
            f"a {tokens or '?'}-token prompt ({BLOCKS_FOR_CACHE}+ blocks of {self.block}) answered "
            "cold, again alone (from the prefix cache) and amid "
            f"{self.others} others",
            exercised=self.caching and (tokens or 0) > 2 * self.block,
        )
        if not self.caching:
            path.detail += "; enable_prefix_caching is off: no hit possible"
        self._compare(path, cold, self.runner.infer(prompt), "again alone")
        self._compare(path, cold, self.runner.infer_amid(prompt, self.others), "amid others")
        return path

    def shared_prefix(self) -> Path:
        prefix = _text(self.nonce + "b", BLOCKS_FOR_CACHE * self.block)
        prompts = [
            _request(self.template, prefix + f" Question {i}: which word comes next")
            for i in range(SHARED_PROMPTS)
        ]
        together = self.runner.infer_concurrent(prompts)
        path = Path(
            "shared-prefix",
            f"{SHARED_PROMPTS} prompts sharing a {BLOCKS_FOR_CACHE}-block prefix sent together "
            "(cold), then each alone",
        )
        for prompt, got in zip(prompts, together, strict=True):
            self._compare(path, self.runner.infer(prompt), got, "in flight together")
        return path

    def chunked_prefill(self) -> Path:
        name = "chunked-prefill"
        if not self.budget:
            return Path(
                name,
                "engine_args.max_num_batched_tokens is unset: the step's token budget is vLLM's "
                "default, unknown here",
                exercised=False,
            )
        per_word = self.tokens_per_word or TOKENS_PER_WORD_MAX
        words = int(int(self.budget) * CHUNKED_FACTOR / per_word) + 1
        room = int(self.max_len) - LONG_DECODE_TOKENS if self.max_len else None
        if room is not None and (words + 2) * per_word * 1.05 > room:
            return Path(
                name,
                f"max_model_len {self.max_len} leaves no room for a prompt longer than "
                f"max_num_batched_tokens {self.budget}: no prompt is prefilled in chunks",
                exercised=False,
            )
        prompt = _request(self.template, _text(self.nonce + "c", words))
        loaded = self.runner.infer_amid(prompt, self.others)
        tokens = _input_tokens(loaded)
        path = Path(
            name,
            f"a {tokens or '?'}-token prompt (budget {self.budget} tokens a step) sent cold amid "
            f"{self.others} decoding streams, then alone",
            exercised=tokens is not None and tokens > int(self.budget),
        )
        self._compare(path, self.runner.infer(prompt), loaded, "cold amid decoding streams")
        return path

    def long_decode(self) -> Path:
        tokens = LONG_DECODE_TOKENS
        if self.max_len:
            tokens = max(16, min(tokens, int(self.max_len) - 64))
        prompt = _request(self.template, _text(self.nonce + "d", 8), max_tokens=tokens)
        path = Path(
            "long-decode", f"{tokens} generated tokens, alone and amid {self.others} others"
        )
        alone = self.runner.infer(prompt)
        self._compare(path, alone, self.runner.infer_amid(prompt, self.others), "amid others")
        return path

    def seeded_sampling(self) -> Path:
        prompt = _request(self.template, _text(self.nonce + "e", 8), **SAMPLING)
        path = Path(
            "seeded-sampling",
            f"temperature {SAMPLING['temperature']}, top_p {SAMPLING['top_p']}, seed "
            f"{SAMPLING['seed']}: alone twice and amid {self.others} others (measured; batch "
            "invariance covers greedy decoding only)",
            required=False,
        )
        alone = self.runner.infer(prompt)
        self._compare(path, alone, self.runner.infer(prompt), "again alone")
        self._compare(path, alone, self.runner.infer_amid(prompt, self.others), "amid others")
        return path

    def run(self) -> list[Path]:
        """Every path; one whose request the server refuses (e.g. a prompt past its context) is
        reported as not exercised with the server's answer, and the others still run."""
        from tritonbuild.verify.runners import InferError

        paths = []
        for name, check in (
            ("prefix-cache", self.prefix_cache),
            ("shared-prefix", self.shared_prefix),
            ("chunked-prefill", self.chunked_prefill),
            ("long-decode", self.long_decode),
            ("seeded-sampling", self.seeded_sampling),
        ):
            try:
                paths.append(check())
            except InferError as e:
                paths.append(Path(name, f"not answered: {e}", exercised=False))
        return paths


def summary(paths: list[Path]) -> str:
    """One line: which paths were bit-identical, which differed, which were not exercised."""
    parts = []
    for path in paths:
        state = (
            f"{path.differing} of {path.answers} differ"
            if path.differing
            else f"{path.answers} identical"
        )
        flags = [] if path.exercised else ["not exercised"]
        flags += [] if path.required else ["not required"]
        parts.append(f"{path.name}: {state}" + (f" ({', '.join(flags)})" if flags else ""))
    return "; ".join(parts)
