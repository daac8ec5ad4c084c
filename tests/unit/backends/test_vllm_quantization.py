"""engine_args.quantization takes the quantization methods of the vLLM the serving image ships (facts:
vllm_engine_args.json quantization_methods per version; the image table in llm/images.py)."""

from __future__ import annotations

import pytest

from tests.contracts.facts import load, vllm_of_image
from tritonbuild.backends.vllm.versions import IN_EVERY_RECORDED, quantization_problem

VERSIONS = load("vllm_engine_args")["versions"]


def _image(tag: str) -> str:
    return f"nvcr.io/nvidia/tritonserver:{tag}-vllm-python-py3"


def _methods(tag: str) -> set:
    return set(VERSIONS[vllm_of_image(_image(tag))]["quantization_methods"]["values"])


def _plan_quantized(cli, tmp_path, quant_method: str, quantization: str, tag: str | None = None):
    """plan of the GPU tiny-llama vLLM recipe on a copy of its checkpoint whose config.json says quant_method,
    with engine_args.quantization (and the image of tag, when given)."""
    import json
    import shutil

    from tests.conftest import EXAMPLES, ROOT

    shutil.copytree(EXAMPLES / "tiny-llama", tmp_path / "ck")
    config = json.loads((tmp_path / "ck" / "config.json").read_text())
    config["quantization_config"] = {"quant_method": quant_method, "bits": 4, "group_size": 128}
    (tmp_path / "ck" / "config.json").write_text(json.dumps(config))
    text = (ROOT / "recipes" / "gpu" / "tiny-llama-vllm.yaml").read_text()
    image = f"\nimage: {{triton_image: {_image(tag)}}}" if tag else ""
    text = text.replace(
        "checkpoint: {path: ../examples/tiny-llama}",
        f"checkpoint: {{path: {tmp_path / 'ck'}}}{image}",
    )
    (tmp_path / "v.yaml").write_text(
        text.replace("engine_args:", f"engine_args:\n  quantization: {quantization}", 1)
    )
    return cli("plan", tmp_path / "v.yaml")


def test_a_method_only_a_newer_vllm_has_is_refused_on_an_older_image():
    assert "fp8_per_block" in _methods("26.07") and "fp8_per_block" not in _methods("25.12")
    assert quantization_problem("fp8_per_block", _image("26.07")) is None
    message, hint = quantization_problem("fp8_per_block", _image("25.12"))
    assert "ships vLLM 0.11.1" in message and "'fp8_per_block'" in message and "gptq_marlin" in hint


def test_methods_beyond_awq_gptq_fp8_are_taken_where_the_images_vllm_has_them():
    for method in ("awq_marlin", "gptq_marlin", "bitsandbytes", "modelopt_fp4", "mxfp4"):
        assert method in _methods("25.12") and quantization_problem(method, _image("25.12")) is None


@pytest.mark.parametrize("method, ok", [("awq_marlin", True), ("online", False)])
def test_an_image_whose_vllm_is_not_recorded_takes_the_methods_every_recorded_vllm_has(method, ok):
    """25.06 ships vLLM 0.9.0rc1, which the registry has no wheel of (vllm_engine_args.json unrecorded)."""
    assert (
        vllm_of_image(_image("25.06")) not in VERSIONS
        and "0.9.0rc1" in load("vllm_engine_args")["unrecorded"]
    )
    assert (method in IN_EVERY_RECORDED) is ok
    problem = quantization_problem(method, _image("25.06"))
    assert (problem is None) is ok
    if problem:
        assert "vLLM 0.9.0rc1" in problem[0] and "not recorded" in problem[0]


@pytest.mark.parametrize("tag, code", [("26.06", 0), ("26.05", 3)])
def test_auto_gptq_plans_for_a_gptq_checkpoint_where_the_images_vllm_has_it(
    cli, tmp_path, tag, code
):
    """26.06 ships vLLM 0.22.1, whose QuantizationMethods and AutoGPTQConfig.override_quantization_method take
    auto_gptq (recorded from its wheel); 26.05's 0.19.0 has neither."""
    version = vllm_of_image(_image(tag))
    by_version = load("vllm_quantization")["marlin_override"]["by_version"]
    assert ("auto_gptq" in by_version[version]["accepted"]["gptq"]) is (code == 0)
    assert ("auto_gptq" in _methods(tag)) is (code == 0)
    r = _plan_quantized(cli, tmp_path, "gptq", "auto_gptq", tag)
    assert r.exit_code == code, r.stderr
    if code:
        assert f"vLLM {version}" in r.stderr and "auto_gptq" in r.stderr


def test_the_recipe_error_names_the_key(cli, tmp_path):
    from tests.conftest import ROOT

    text = (ROOT / "recipes" / "gpu" / "tiny-llama-vllm.yaml").read_text()
    assert "engine_args:" in text
    (tmp_path / "v.yaml").write_text(
        text.replace("engine_args:", "engine_args:\n  quantization: fp8_per_block", 1)
    )
    r = cli("plan", tmp_path / "v.yaml")
    assert r.exit_code == 3 and "engine_args.quantization" in r.stderr and "v.yaml:" in r.stderr, (
        r.stderr
    )


@pytest.mark.parametrize(
    "method, wanted, code",
    [
        ("awq", "awq_marlin", 0),
        ("gptq", "gptq_marlin", 0),
        ("awq", "gptq_marlin", 4),
        ("gptq", "awq", 4),
    ],
)
def test_a_marlin_method_is_taken_for_the_checkpoint_vllm_converts(
    cli, tmp_path, method, wanted, code
):
    """vLLM overrides an AWQ/GPTQ checkpoint to its Marlin kernel when asked (facts: vllm_quantization.json)."""
    facts = load("vllm_quantization")["marlin_override"]["accepted"]
    assert (wanted in facts[method]) is (code == 0)
    r = _plan_quantized(cli, tmp_path, method, wanted)
    assert r.exit_code == code, r.stderr
    if code:
        assert f"quant_method {method!r}" in r.stderr


def test_the_methods_a_quantized_checkpoint_loads_with_are_those_of_the_images_vllm():
    """AWQ / GPTQ checkpoints: each recorded vLLM wheel's override_quantization_method (vllm_quantization.json
    by_version) accepts the method, its Marlin name, and auto_awq / auto_gptq where the version has them."""
    from tritonbuild.backends.llm.images import VLLM_IMAGES
    from tritonbuild.backends.vllm.versions import checkpoint_methods

    by_version = load("vllm_quantization")["marlin_override"]["by_version"]
    seen = set()
    for tag, version in VLLM_IMAGES.items():
        if version in by_version:
            seen.add(version)
            for method, accepted in by_version[version]["accepted"].items():
                assert checkpoint_methods(method, _image(tag)) == set(accepted) - {"marlin"}, (
                    tag,
                    method,
                )
    assert {"0.11.1", "0.24.0"} <= seen  # the default image's and 26.07's
    assert checkpoint_methods("fp8", _image("26.07")) == {"fp8"}


@pytest.mark.parametrize("tag, code", [("26.07", 0), ("25.12", 3)])
def test_auto_awq_plans_for_an_awq_checkpoint_where_the_images_vllm_has_it(
    cli, tmp_path, tag, code
):
    """26.07 ships vLLM 0.24.0, whose QuantizationMethods and AutoAWQConfig.override_quantization_method take
    auto_awq (recorded from its wheel); 25.12's 0.11.1 has neither."""
    version = vllm_of_image(_image(tag))
    by_version = load("vllm_quantization")["marlin_override"]["by_version"]
    assert ("auto_awq" in by_version[version]["accepted"]["awq"]) is (code == 0)
    assert ("auto_awq" in _methods(tag)) is (code == 0)
    r = _plan_quantized(cli, tmp_path, "awq", "auto_awq", tag)
    assert r.exit_code == code, r.stderr
    if code:
        assert (
            "vLLM 0.11.1" in r.stderr and "auto_awq" in r.stderr and f"vLLM {version}" in r.stderr
        )


def test_a_model_json_key_the_images_vllm_lacks_is_a_recipe_error_at_its_key(cli, tmp_path):
    """24.12 ships vLLM 0.5.5, whose AsyncEngineArgs has no speculative_config (recorded from its wheel)."""
    from tests.conftest import ROOT

    assert (
        "speculative_config" not in load("vllm_engine_args")["versions"]["0.5.5"]["AsyncEngineArgs"]
    )
    text = (ROOT / "recipes" / "gpu" / "tiny-llama-vllm.yaml").read_text()
    text += (
        f"image: {{triton_image: {_image('24.12')}}}\n"
        "speculative: {method: eagle, num_speculative_tokens: 2, model: ../examples/tiny-llama}\n"
    )
    (tmp_path / "v.yaml").write_text(text)
    r = cli("plan", tmp_path / "v.yaml")
    assert r.exit_code == 3 and "v.yaml:" in r.stderr and "speculative" in r.stderr, r.stderr
    assert (
        "speculative_config, which vLLM 0.5.5 does not take" in r.stderr
        and "or newer" not in r.stderr
    )
    # the images whose vLLM's AsyncEngineArgs has it, newest first: 26.08's 0.27.1 … 25.05's 0.8.4
    assert (
        "26.08 (vLLM 0.27.1), 26.07 (vLLM 0.24.0)" in r.stderr
        and "leave the setting out" in r.stderr
    )
    assert "25.05 (vLLM 0.8.4)" in r.stderr and "25.04" not in r.stderr
