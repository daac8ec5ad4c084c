"""Quantization formats by route and GPU architecture, checked against upstream's support matrices
(tests/contracts/facts/trtllm_quantization.json), and their bytes per weight."""

from __future__ import annotations

import pytest

from tests.contracts.facts import load
from tritonbuild.backends.llm.gpus import GPU_SM
from tritonbuild.backends.tensorrtllm import quant
from tritonbuild.backends.tensorrtllm.checks.recipe import check_recipe
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe

FACTS = load("trtllm_quantization")


def _recipe(**kw) -> LLMRecipe:
    return LLMRecipe(name="m", version=1, backend="tensorrtllm", checkpoint={"path": "c"}, **kw)


def _quant_problems(**kw) -> list[tuple]:
    return [p for p in check_recipe(_recipe(**kw)) if tuple(p[0]) == ("quantization",)]


def test_nvfp4_on_sm90_is_a_recipe_error_naming_sm100():
    for runtime in ("engine", "pytorch"):
        (problem,) = _quant_problems(quantization="nvfp4", runtime=runtime, gpu="H200")
        assert (
            "nvfp4" in problem[1]
            and "SM 100" in problem[1]
            and "H200 is Hopper (SM 90)" in problem[1]
        )
        assert not _quant_problems(quantization="nvfp4", runtime=runtime, gpu="B200")


def test_the_llm_api_architectures_are_upstreams_hardware_matrix():
    """Every recipe value the LLM-API route offers runs on exactly the architectures the matrix marks Y."""
    hw = FACTS["llmapi_hardware"]
    for value, column in hw["recipe_values"].items():
        marked = {arch for arch, row in hw["rows"].items() if column in row["Y"]}
        assert quant.FORMATS[value].llmapi_archs == marked, value
    assert set(quant.LLMAPI_FORMATS) == {"none", *hw["recipe_values"]}
    assert not set(quant.LLMAPI_FORMATS) & set(hw["not_offered"])


def test_the_engine_architectures_are_upstreams_precision_list():
    """An architecture whose precision list has the format's number type builds it; FP8 activations need SM 89."""
    eng = FACTS["engine_precision"]
    for value, kind in eng["recipe_values"].items():
        if value in ("nvfp4", "w4a8_awq"):
            continue
        listed = {arch for arch, types in eng["rows"].items() if kind in types}
        assert listed <= quant.FORMATS[value].engine_archs, value
        assert (kind in ("FP8",)) == ("Ampere" not in quant.FORMATS[value].engine_archs), value
    assert not any("FP4" in types for types in eng["rows"].values())
    assert quant.FORMATS["nvfp4"].engine_archs == {"Blackwell"}
    assert "SM >= 89" in eng["footnote_smgte89"]
    assert all(min(quant.ARCHS[a]) >= 8.9 for a in quant.FORMATS["w4a8_awq"].engine_archs)


@pytest.mark.parametrize(
    "value, runtime, gpu, words",
    [
        (
            "w4a8_awq",
            "engine",
            "A100-80",
            "needs Ada (SM 89), Hopper (SM 90), Blackwell (SM 100/103/120) on the engine",
        ),
        ("w4a8_awq", "pytorch", "B200", "the engine route runs it on"),
        ("int4_awq", "pytorch", "B200", "B200 is Blackwell (SM 100)"),
    ],
)
def test_a_format_the_gpu_lacks_on_its_route_is_refused(value, runtime, gpu, words):
    (problem,) = _quant_problems(quantization=value, runtime=runtime, gpu=gpu)
    assert words in problem[1] and problem[2]


@pytest.mark.parametrize(
    "value", ["int8_weight_only", "int8_sq", "int8_sq_per_channel_per_token", "int4_gptq"]
)
def test_engine_only_formats_take_the_engine_route_or_name_it(value):
    auto = _recipe(quantization=value)
    assert auto.runtime == "engine" and "engine route only" in auto.route_why
    (problem,) = _quant_problems(quantization=value, runtime="pytorch")
    assert (
        "exists only on the TensorRT engine route" in problem[1] and "runtime: engine" in problem[2]
    )


def test_the_engine_algorithm_follows_the_converters():
    sq = FACTS["smoothquant"]["quant_algo"]
    for value, flags in (
        ("int8_sq", "neither"),
        ("int8_sq_per_channel", "per_channel"),
        ("int8_sq_per_token", "per_token"),
        ("int8_sq_per_channel_per_token", "per_channel+per_token"),
    ):
        assert quant.engine_algos(value, None) == {sq[flags]}
    read = FACTS["converters_read_quantization_config"]["quant_method"]
    for source in ("awq", "gptq"):
        assert quant.engine_algos("int4_awq", {"source": source}) == {
            read[source]["quant_algo"].split()[0]
        }
    assert quant.engine_algos("int8_weight_only", None) == {
        FACTS["weight_only"]["quant_algo"]["int8"]
    }


def test_bytes_per_weight_by_format():
    """One 4096 → 1024 layer, by hand: values, scales (and zeros), per-tensor scales."""
    lin = [(4096, 1024)]
    n, groups = 4096 * 1024, 32 * 1024
    assert quant.linear_bytes(lin, "int8_weight_only") == n + 1024 * 2
    assert quant.linear_bytes(lin, "int4_gptq", 128) == n // 2 + groups * 2 * 2
    assert quant.linear_bytes(lin, "int4_gptq", 64) == n // 2 + 2 * groups * 2 * 2
    assert (
        quant.linear_bytes(lin, "int4_awq", 128) == n // 2 + groups * 2 + 4096 * 2
    )  # ModelOpt: pre-quant scale
    assert (
        quant.linear_bytes(lin, "int4_awq", 128, zero_point=True) == n // 2 + groups * 4
    )  # AutoAWQ → GPTQ form
    assert quant.linear_bytes(lin, "nvfp4") == n // 2 + n // 16 + 8
    assert quant.linear_bytes(lin, "int8_sq") == n + 1024 * 4 + 8
    assert quant.linear_bytes(lin, "w4a8_awq") == n // 2 + groups * 2 + 4096 * 2 + 8


def test_every_gpu_has_an_architecture():
    assert {quant.arch_of(sm) for sm in GPU_SM.values()} <= set(quant.ARCHS)
    assert quant.arch_of(GPU_SM["B200"]) == "Blackwell"


@pytest.mark.parametrize("value", quant.NAMES)
def test_the_llm_api_build_asks_for_the_algorithm_the_engine_check_expects(value):
    """engine.build_path: llmapi passes QuantConfig(quant_algo) itself: the engine it builds must pass emit's check."""
    from tritonbuild.backends.tensorrtllm import argv as cmd

    spec = cmd.llmapi_spec(
        _recipe(quantization=value, runtime="engine", gpu="B200" if value == "nvfp4" else "H200"),
        "/c",
        "/e",
    )
    assert spec["quant_algo"] in quant.engine_algos(value, None)


def test_fp8_block_scales_run_where_the_matrix_marks_them():
    from tritonbuild.backends.tensorrtllm.prequant import FP8_BLOCK_ARCHS

    hw = FACTS["llmapi_hardware"]
    column = hw["checkpoint_formats"]["fp8_block"]
    assert set(FP8_BLOCK_ARCHS) == {arch for arch, row in hw["rows"].items() if column in row["Y"]}
