"""Engine config.json ↔ recipe cross-checks: each problem names both sides."""

from __future__ import annotations

import copy
import json

import pytest

from tests.conftest import EXAMPLES, ROOT
from tritonbuild.backends import REGISTRY
from tritonbuild.backends.tensorrtllm.checks.engine import engine_problems
from tritonbuild.recipe.load import load_recipe

ENGINE = json.loads((ROOT / "tests/fixtures/engines/tiny-llama-w4a16/config.json").read_text())


@pytest.fixture
def recipe():
    return load_recipe(EXAMPLES / "tiny-llama-int4.yaml", REGISTRY.recipe_kinds()).recipe


def _with(path: str, value):
    e = copy.deepcopy(ENGINE)
    node = e
    *parents, last = path.split(".")
    for p in parents:
        node = node[p]
    node[last] = value
    return e


def test_fixture_engine_matches_the_example(recipe):
    assert engine_problems(recipe, ENGINE, ["rank0.engine"]) == []


@pytest.mark.parametrize(
    "path, value, words",
    [
        (
            "build_config.max_batch_size",
            16,
            "engine build_config.max_batch_size = 16, recipe engine.max_batch_size = 8",
        ),
        ("build_config.max_beam_width", 4, "max_beam_width = 4, recipe engine.max_beam_width = 1"),
        ("build_config.max_seq_len", 1024, "max_seq_len = 1024, recipe engine.max_seq_len = 512"),
        (
            "build_config.plugin_config.use_paged_context_fmha",
            False,
            "enable_block_reuse needs use_paged_context_fmha, which the engine was built without",
        ),
        (
            "build_config.plugin_config.tokens_per_block",
            32,
            "engine tokens_per_block 32, recipe kv_cache.tokens_per_block 64",
        ),
        (
            "pretrained_config.logits_dtype",
            "float16",
            "logits_dtype float16, recipe engine.logits_dtype float32",
        ),
        (
            "pretrained_config.quantization.quant_algo",
            "FP8",
            "engine quantization 'FP8', recipe quantization int4_weight_only",
        ),
        ("version", "1.2.1", "engine built by TensorRT-LLM 1.2.1, the serving image has 1.1.0"),
        (
            "pretrained_config.mapping.tp_size",
            2,
            "engine mapping tp_size=2 pp_size=1, recipe engine.tp_size=1",
        ),
    ],
)
def test_each_mismatch_names_both_sides(recipe, path, value, words):
    problems = engine_problems(recipe, _with(path, value), ["rank0.engine"])
    assert any(words in p for p in problems), problems


def test_rank_files_must_match_world_size(recipe):
    e = _with("pretrained_config.mapping", {"world_size": 2, "tp_size": 1, "pp_size": 1})
    assert any(
        "needs rank0..rank1.engine" in p for p in engine_problems(recipe, e, ["rank0.engine"])
    )


def test_lora_needs_the_engines_lora_plugin_for_its_modules_and_rank():
    from tests.contracts.facts import load
    from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe

    keys = load("trtllm_scripts")["scripts"]["trtllm-build"]["lora"]["engine_config"]
    assert keys["plugin"] == "build_config.plugin_config.lora_plugin"
    r = LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        checkpoint={"path": "c"},
        lora={
            "adapters": {"fr": "a"},
            "target_modules": ["attn_q", "attn_k"],
            "max_lora_rank": 128,
        },
    )
    assert any("built without" in p for p in engine_problems(r, ENGINE, ["rank0.engine"]))
    built = json.loads(json.dumps(ENGINE))
    built["build_config"]["plugin_config"]["lora_plugin"] = "auto"
    built["build_config"]["lora_config"] = {
        "lora_target_modules": ["attn_q", "attn_v"],
        "max_lora_rank": 64,
    }
    problems = [p for p in engine_problems(r, built, ["rank0.engine"]) if "lora" in p]
    assert len(problems) == 2 and "attn_k" in problems[0] and "128 > the engine's 64" in problems[1]


def _upstream(recipe, draft_len: int | None) -> dict:
    """max_seq_len and max_num_tokens as trtllm-build records them: the recorded formulas, in the recorded order
    (facts/trtllm_speculative.json draft_limits), on the recipe's limits."""
    from tests.contracts.facts import load

    facts, e = load("trtllm_speculative")["draft_limits"], recipe.engine
    env = {
        "max_num_tokens": e.max_num_tokens,
        "max_seq_len": e.max_seq_len,
        "max_batch_size": e.max_batch_size,
        "tokens_per_block": recipe.kv_cache.tokens_per_block,
        "max_draft_len": draft_len,
        "min": min,
        "max": max,
    }
    for rule in facts["check_max_num_tokens"]["with_padding_removed_and_context_fmha"]:
        env["max_num_tokens"] = eval(rule["formula_python"], {}, env)
    if draft_len is not None:
        assert facts["order"] == ["check_max_num_tokens", "max_seq_len", "max_num_tokens"]
        env["max_seq_len"] = eval(facts["max_seq_len"]["formula_python"], {}, env)
        env["max_num_tokens"] = eval(facts["max_num_tokens"]["formula_python"], {}, env)
    return {"max_seq_len": env["max_seq_len"], "max_num_tokens": env["max_num_tokens"]}


def test_a_speculative_engine_as_trtllm_build_writes_it_matches_its_recipe(recipe):
    """trtllm-build adds max_draft_len to max_seq_len (and may raise max_num_tokens) in the config.json of an engine
    built with speculative decoding: the check expects those values, not the recipe's literal ones."""
    r = type(recipe).model_validate(
        {
            **recipe.model_dump(exclude_none=True),
            "speculative": {
                "mode": "lookahead",
                "window_size": 4,
                "ngram_size": 3,
                "verification_set_size": 2,
            },
        }
    )
    draft = 1 + (4 - 1 + 2) * 2
    want = _upstream(r, draft)
    assert want["max_seq_len"] == r.engine.max_seq_len + draft
    built = copy.deepcopy(ENGINE)
    built["build_config"].update(want, speculative_decoding_mode=8, max_draft_len=draft)
    assert engine_problems(r, built, ["rank0.engine"]) == []
    plain = _with("build_config.max_seq_len", r.engine.max_seq_len)
    plain["build_config"].update(speculative_decoding_mode=8, max_draft_len=draft)
    seq = r.engine.max_seq_len
    assert (
        engine_problems(r, plain, ["rank0.engine"])[0]
        == f"engine build_config.max_seq_len = {seq}, recipe "
        f"engine.max_seq_len = {seq} (which trtllm-build records as {want['max_seq_len']})"
    )


def test_a_max_num_tokens_trtllm_build_clamps_is_expected_clamped(recipe):
    """check_max_num_tokens keeps max_num_tokens within max_seq_len × max_batch_size (a warning, not an error):
    the engine records the clamped value, which the check expects."""
    r = recipe.model_copy(
        update={"engine": recipe.engine.model_copy(update={"max_num_tokens": 100_000})}
    )
    want = _upstream(r, None)["max_num_tokens"]
    assert want == r.engine.max_seq_len * r.engine.max_batch_size < 100_000
    assert engine_problems(r, _with("build_config.max_num_tokens", want), ["rank0.engine"]) == []
