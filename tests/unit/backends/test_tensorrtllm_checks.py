"""Engine config.json ↔ recipe cross-checks: each problem names both sides."""

from __future__ import annotations

import copy
import json

import pytest

from tests.conftest import EXAMPLES, ROOT
from tritonbuild.backends import REGISTRY
from tritonbuild.backends.tensorrtllm.checks import engine_problems
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


@pytest.mark.parametrize("path, value, words", [
    ("build_config.max_batch_size", 16, "engine build_config.max_batch_size = 16, recipe engine.max_batch_size = 8"),
    ("build_config.max_beam_width", 4, "max_beam_width = 4, recipe engine.max_beam_width = 1"),
    ("build_config.max_seq_len", 1024, "max_seq_len = 1024, recipe engine.max_seq_len = 512"),
    ("build_config.plugin_config.use_paged_context_fmha", False,
     "enable_block_reuse needs use_paged_context_fmha, which the engine was built without"),
    ("build_config.plugin_config.tokens_per_block", 32,
     "engine tokens_per_block 32, recipe kv_cache.tokens_per_block 64"),
    ("pretrained_config.logits_dtype", "float16", "logits_dtype float16, recipe engine.logits_dtype float32"),
    ("pretrained_config.quantization.quant_algo", "FP8", "engine quantization 'FP8', recipe quantization "
                                                         "int4_weight_only"),
    ("version", "1.2.1", "engine built by TensorRT-LLM 1.2.1, the serving image has 1.1.0"),
    ("pretrained_config.mapping.tp_size", 2, "engine mapping tp_size=2 pp_size=1, recipe engine.tp_size=1"),
])
def test_each_mismatch_names_both_sides(recipe, path, value, words):
    problems = engine_problems(recipe, _with(path, value), ["rank0.engine"])
    assert any(words in p for p in problems), problems


def test_rank_files_must_match_world_size(recipe):
    e = _with("pretrained_config.mapping", {"world_size": 2, "tp_size": 1, "pp_size": 1})
    assert any("needs rank0..rank1.engine" in p for p in engine_problems(recipe, e, ["rank0.engine"]))


def test_lora_needs_the_engines_lora_plugin_for_its_modules_and_rank():
    from tests.contracts.facts import load
    from tritonbuild.backends.tensorrtllm.recipe import LLMRecipe

    keys = load("trtllm_scripts")["scripts"]["trtllm-build"]["lora"]["engine_config"]
    assert keys["plugin"] == "build_config.plugin_config.lora_plugin"
    r = LLMRecipe(name="m", version=1, backend="tensorrtllm", checkpoint={"path": "c"},
                  lora={"adapters": {"fr": "a"}, "target_modules": ["attn_q", "attn_k"], "max_lora_rank": 128})
    assert any("built without" in p for p in engine_problems(r, ENGINE, ["rank0.engine"]))
    built = json.loads(json.dumps(ENGINE))
    built["build_config"]["plugin_config"]["lora_plugin"] = "auto"
    built["build_config"]["lora_config"] = {"lora_target_modules": ["attn_q", "attn_v"], "max_lora_rank": 64}
    problems = [p for p in engine_problems(r, built, ["rank0.engine"]) if "lora" in p]
    assert len(problems) == 2 and "attn_k" in problems[0] and "128 > the engine's 64" in problems[1]
