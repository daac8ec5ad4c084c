"""Speculative decoding's recipe keys per route and the engine check (speculative.py, recipe.Speculative): lookahead
on the engine route, draft_target / eagle on the LLM-API route, each elsewhere a recipe error naming the route that
has it; an engine's config.json is held to the recipe's mode and draft length (facts/trtllm_speculative.json)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from tests.conftest import ROOT
from tests.contracts.facts import load
from tritonbuild.backends.tensorrtllm import speculative as spec
from tritonbuild.backends.tensorrtllm.checks.recipe import check_recipe
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
from tritonbuild.backends.tensorrtllm.recipe.speculative import lookahead_draft_len

FACTS = load("trtllm_speculative")
ENGINE = json.loads((ROOT / "tests/fixtures/engines/tiny-llama-w4a16/config.json").read_text())
LOOKAHEAD = {"mode": "lookahead", "window_size": 4, "ngram_size": 3, "verification_set_size": 2}


def _recipe(**kw) -> LLMRecipe:
    return LLMRecipe(name="m", version=1, backend="tensorrtllm", checkpoint={"path": "c"}, **kw)


@pytest.mark.parametrize("case", FACTS["lookahead"]["max_draft_len"]["examples"])
def test_lookahead_draft_length_is_tensorrt_llms_formula(case):
    assert lookahead_draft_len(case["w"], case["n"], case["g"]) == case["max_draft_len"]
    assert (
        FACTS["lookahead"]["max_draft_len"]["minimum"]["meaningful"][1] == 2
    )  # the recipe's ngram_size minimum


def test_lookahead_takes_the_engine_route_and_elsewhere_is_a_recipe_error_naming_it():
    assert (
        _recipe(speculative=LOOKAHEAD).runtime == "engine"
    )  # runtime: auto goes where lookahead is generated
    assert "lookahead" in _recipe(speculative=LOOKAHEAD).route_why
    with pytest.raises(ValidationError, match=r"speculative\.mode lookahead needs runtime: engine"):
        _recipe(runtime="pytorch", quantization="none", speculative=LOOKAHEAD)
    with pytest.raises(ValidationError, match=r"lookahead needs engine\.build_path: cli"):
        _recipe(speculative=LOOKAHEAD, engine={"build_path": "llmapi"})
    with pytest.raises(
        ValidationError, match="speculative needs runtime: pytorch for mode draft_target"
    ):
        _recipe(
            runtime="engine",
            speculative={"mode": "draft_target", "max_draft_len": 3, "draft_checkpoint": "d"},
        )


@pytest.mark.parametrize(
    "bad, words",
    [
        (
            {"mode": "lookahead", "window_size": 4, "ngram_size": 3},
            r"lookahead\.verification_set_size\n +Field required",
        ),
        (
            {**LOOKAHEAD, "draft_checkpoint": "d"},
            r"lookahead\.draft_checkpoint\n +Extra inputs are not permitted",
        ),
        (
            {**LOOKAHEAD, "max_draft_len": 3},
            r"lookahead\.max_draft_len\n +Extra inputs are not permitted",
        ),
        ({**LOOKAHEAD, "ngram_size": 1}, "greater than or equal to 2"),
        ({"mode": "eagle", "max_draft_len": 3}, r"eagle\.draft_checkpoint\n +Field required"),
        (
            {"mode": "eagle", "max_draft_len": 3, "draft_checkpoint": "d", "ngram_size": 3},
            r"eagle\.ngram_size\n +Extra",
        ),
    ],
)
def test_a_speculative_block_missing_or_mixing_a_modes_keys_is_a_recipe_error(bad, words):
    with pytest.raises(ValidationError, match=words):
        _recipe(speculative=bad)


def test_lookahead_outside_in_flight_fused_batching_is_a_recipe_error():
    rules = check_recipe(_recipe(speculative=LOOKAHEAD, serving={"batching_strategy": "V1"}))
    assert [loc for loc, *_ in rules] == [("serving", "batching_strategy")]
    assert "Inflight-fused-batching" in FACTS["lookahead"]["support_matrix"]["entries"]
    assert check_recipe(_recipe(speculative=LOOKAHEAD)) == []


def _built(mode: int, draft_len: int) -> dict:
    return {**ENGINE["build_config"], "speculative_decoding_mode": mode, "max_draft_len": draft_len}


def test_the_engine_check_reads_the_speculative_mode_trtllm_build_recorded():
    values = {int(k): v for k, v in FACTS["engine_config"]["values"].items()}
    assert values == spec.SPECULATIVE_DECODING_MODES
    assert ENGINE["build_config"]["speculative_decoding_mode"] == 1  # the fixture, built without
    r = _recipe(speculative=LOOKAHEAD)
    n = lookahead_draft_len(4, 3, 2)
    lookahead = next(k for k, v in values.items() if v == "lookahead_decoding")
    assert spec.engine_problems(_recipe(), ENGINE["build_config"]) == []
    assert (
        "speculative_decoding_mode none, the recipe asks for lookahead_decoding"
        in spec.engine_problems(r, ENGINE["build_config"])[0]
    )
    assert spec.engine_problems(r, _built(lookahead, n)) == []
    assert (
        f"max_draft_len {n + 1} differs from the {n}"
        in spec.engine_problems(r, _built(lookahead, n + 1))[0]
    )
    assert (
        "built with speculative_decoding_mode medusa"
        in spec.engine_problems(_recipe(), _built(4, 63))[0]
    )


MEDUSA = {
    "mode": "medusa",
    "heads_checkpoint": "heads",
    "max_draft_len": 4,
    "medusa_choices": [[0], [0, 0], [1]],
}
MEDUSA_FACTS = FACTS["medusa"]["converter"]


def test_medusa_takes_the_engine_route_and_elsewhere_is_a_recipe_error_naming_it():
    assert _recipe(speculative=MEDUSA, dtype="float16").runtime == "engine"
    with pytest.raises(ValidationError, match=r"speculative\.mode medusa needs runtime: engine"):
        _recipe(runtime="pytorch", quantization="none", speculative=MEDUSA)
    with pytest.raises(
        ValidationError, match=r"speculative\.mode medusa needs engine\.build_path: cli"
    ):
        _recipe(speculative=MEDUSA, engine={"build_path": "llmapi"})


@pytest.mark.parametrize(
    "choices, words",
    [
        ([[0]] * 5, "5 paths, more than max_draft_len 4"),
        ([[0, 0, 0, 0, 0]], r"1 to num_medusa_heads \(4\) indices"),
        ([[]], r"1 to num_medusa_heads"),
        ([[0, -1]], ">= 0"),
    ],
)
def test_a_medusa_tree_the_engine_cannot_hold_is_a_recipe_error(choices, words):
    with pytest.raises(ValidationError, match=words):
        _recipe(speculative={**MEDUSA, "medusa_choices": choices})


def test_medusa_defaults_are_the_converters():
    s = _recipe(speculative={k: v for k, v in MEDUSA.items() if k != "max_draft_len"}).speculative
    want = MEDUSA_FACTS["defaults"]
    assert (s.num_medusa_heads, s.num_medusa_layers, s.max_draft_len) == (
        want["--num_medusa_heads"],
        want["--num_medusa_layers"],
        want["--max_medusa_token_len"],
    )


@pytest.mark.parametrize("quantization", ["int8_sq", "fp8", "int4_awq", "int4_gptq"])
def test_a_quantization_the_medusa_converter_cannot_make_is_a_recipe_error_naming_those_it_can(
    quantization,
):
    rules = check_recipe(_recipe(speculative=MEDUSA, dtype="float16", quantization=quantization))
    ((_, message, hint),) = [x for x in rules if x[0] == ("quantization",)]
    assert "medusa/convert_checkpoint.py" in message and all(
        q in hint for q in MEDUSA_FACTS["weight_only"]
    )
    assert set(spec.MEDUSA_QUANTIZATIONS) == {"none", *MEDUSA_FACTS["weight_only"]}
    for q in MEDUSA_FACTS["weight_only"]:
        assert check_recipe(_recipe(speculative=MEDUSA, dtype="float16", quantization=q)) == []


def test_dtype_auto_with_medusa_is_a_recipe_error_the_converter_has_no_auto():
    assert "auto" not in MEDUSA_FACTS["choices"]["--dtype"]
    rules = check_recipe(_recipe(speculative=MEDUSA, quantization="none"))
    assert [loc for loc, *_ in rules] == [("dtype",)] and "float16" in rules[0][2]


def test_a_family_the_medusa_converter_does_not_convert_is_named():
    assert set(spec.MEDUSA_MODEL_TYPES) == set(MEDUSA_FACTS["converts"])
    r = _recipe(speculative=MEDUSA, dtype="float16")
    loc, message, hint = spec.medusa_family_problem(r, "qwen2")
    assert "lookahead" in hint
    assert loc == ("speculative", "mode") and "llama, mixtral" in message and "qwen2" in message
    assert (
        spec.medusa_family_problem(r, "llama") is None
        and spec.medusa_family_problem(_recipe(), "qwen2") is None
    )


def test_the_engine_check_holds_a_medusa_engine_to_the_recipes_mode_and_draft_length():
    values = {v: int(k) for k, v in FACTS["engine_config"]["values"].items()}
    r = _recipe(speculative=MEDUSA, dtype="float16")
    assert spec.engine_problems(r, _built(values["medusa"], 4)) == []
    assert (
        "speculative_decoding_mode none, the recipe asks for medusa (speculative.mode medusa)"
        in spec.engine_problems(r, ENGINE["build_config"])[0]
    )
    assert (
        "max_draft_len 63 differs from the 4"
        in spec.engine_problems(r, _built(values["medusa"], 63))[0]
    )
    assert "asks for medusa" in spec.engine_problems(r, _built(values["lookahead_decoding"], 4))[0]


def test_the_engine_step_finds_the_heads_directory_among_its_inputs_by_digest():
    params = {
        "speculative": {
            "mode": "medusa",
            "heads": {"config.json": "a", "sub/model.safetensors": "b"},
        }
    }
    inputs = {
        "/ck/config.json": "c",
        "/ck/model.safetensors": "d",
        "/h/config.json": "a",
        "/h/sub/model.safetensors": "b",
    }
    rest, heads = spec.split_heads(params, inputs)
    assert heads == "/h" and rest == {"/ck/config.json": "c", "/ck/model.safetensors": "d"}
    assert spec.split_heads({"speculative": {"mode": "lookahead_decoding"}}, inputs) == (
        inputs,
        None,
    )
    assert spec.medusa_convert_flags(
        {
            **params["speculative"],
            "num_medusa_heads": 2,
            "num_medusa_layers": 1,
            "max_draft_len": 3,
        },
        heads,
    )[:2] == ["--medusa_model_dir", "/h"]


LIMITS = FACTS["draft_limits"]


@pytest.mark.parametrize("speculative", [LOOKAHEAD, MEDUSA])
def test_a_max_num_tokens_below_one_step_of_draft_tokens_is_a_recipe_error_before_the_build(
    speculative,
):
    """trtllm-build raises max_num_tokens to max_batch_size × (max_draft_len + 1) without a warning (builder.py
    build(), facts draft_limits.max_num_tokens): a recipe below that is refused at the key, naming the figure."""
    r = _recipe(
        speculative=speculative, dtype="float16", quantization="none", engine={"max_batch_size": 64}
    )
    d = r.speculative.draft_len
    need = eval(
        LIMITS["max_num_tokens"]["formula_python"],
        {"max": max},
        {"max_num_tokens": 0, "max_batch_size": 64, "max_draft_len": d},
    )
    assert LIMITS["max_num_tokens"]["silent"] and need == 64 * (d + 1)
    low = r.model_copy(update={"engine": r.engine.model_copy(update={"max_num_tokens": need - 1})})
    [(loc, message, hint)] = [p for p in check_recipe(low) if p[0][0] == "engine"]
    assert loc == ("engine", "max_num_tokens") and f"would be built as {need}" in message
    assert (
        f"max_draft_len {d}" in message and f"set engine.max_num_tokens between {need} and" in hint
    )
    ok = r.model_copy(update={"engine": r.engine.model_copy(update={"max_num_tokens": need})})
    assert [p for p in check_recipe(ok) if p[0][0] == "engine"] == []
    assert spec.built_limits(ok) == {
        "max_seq_len": r.engine.max_seq_len + d,
        "max_num_tokens": need,
    }


def test_a_max_seq_len_too_short_for_one_draft_step_is_a_recipe_error_at_max_seq_len():
    """max_num_tokens is first kept within max_seq_len × max_batch_size, then raised to max_batch_size ×
    (max_draft_len + 1): with max_seq_len <= max_draft_len no max_num_tokens comes through unchanged."""
    r = _recipe(
        speculative=LOOKAHEAD,
        engine={"max_batch_size": 4, "max_input_len": 8, "max_seq_len": 10, "max_num_tokens": 40},
    )
    [(loc, message, hint)] = [p for p in check_recipe(r) if p[0][0] == "engine"]
    assert (
        loc == ("engine", "max_seq_len")
        and "would be built as 48" in message
        and "at least 12" in hint
    )


def test_without_speculative_decoding_the_limits_trtllm_build_records_are_the_recipes():
    r = _recipe(engine={"max_batch_size": 8, "max_seq_len": 512, "max_num_tokens": 2048})
    assert spec.built_limits(r) == {"max_seq_len": 512, "max_num_tokens": 2048}
    assert spec.limit_rules(r) == []
