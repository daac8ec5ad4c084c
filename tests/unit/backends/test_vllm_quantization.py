"""engine_args.quantization takes the quantization methods of the vLLM the serving image ships (facts:
vllm_engine_args.json quantization_methods per version; the image table in tensorrtllm/images.py)."""

from __future__ import annotations

import pytest

from tests.contracts.facts import load, vllm_of_image
from tritonbuild.backends._vllm_quantization import IN_EVERY_RECORDED, quantization_problem

VERSIONS = load("vllm_engine_args")["versions"]


def _image(tag: str) -> str:
    return f"nvcr.io/nvidia/tritonserver:{tag}-vllm-python-py3"


def _methods(tag: str) -> set:
    return set(VERSIONS[vllm_of_image(_image(tag))]["quantization_methods"]["values"])


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
    """26.05 ships vLLM 0.19.0, whose QuantizationMethods is not recorded."""
    assert vllm_of_image(_image("26.05")) not in VERSIONS
    assert (method in IN_EVERY_RECORDED) is ok
    problem = quantization_problem(method, _image("26.05"))
    assert (problem is None) is ok
    if problem:
        assert "vLLM 0.19.0" in problem[0] and "not recorded" in problem[0]


def test_the_recipe_error_names_the_key(cli, tmp_path):
    from tests.conftest import ROOT

    text = (ROOT / "recipes" / "gpu" / "tiny-llama-vllm.yaml").read_text()
    assert "engine_args:" in text
    (tmp_path / "v.yaml").write_text(text.replace("engine_args:", "engine_args:\n  quantization: fp8_per_block", 1))
    r = cli("plan", tmp_path / "v.yaml")
    assert r.exit_code == 3 and "engine_args.quantization" in r.stderr and "v.yaml:" in r.stderr, r.stderr


@pytest.mark.parametrize("method, wanted, code", [("awq", "awq_marlin", 0), ("gptq", "gptq_marlin", 0),
                                                  ("awq", "gptq_marlin", 4), ("gptq", "awq", 4)])
def test_a_marlin_method_is_taken_for_the_checkpoint_vllm_converts(cli, tmp_path, method, wanted, code):
    """vLLM overrides an AWQ/GPTQ checkpoint to its Marlin kernel when asked (facts: vllm_quantization.json)."""
    import json
    import shutil

    from tests.conftest import EXAMPLES, ROOT

    facts = load("vllm_quantization")["marlin_override"]["accepted"]
    assert (wanted in facts[method]) is (code == 0)
    shutil.copytree(EXAMPLES / "tiny-llama", tmp_path / "ck")
    config = json.loads((tmp_path / "ck" / "config.json").read_text())
    config["quantization_config"] = {"quant_method": method, "bits": 4, "group_size": 128}
    (tmp_path / "ck" / "config.json").write_text(json.dumps(config))
    text = (ROOT / "recipes" / "gpu" / "tiny-llama-vllm.yaml").read_text()
    text = text.replace("checkpoint: {path: ../examples/tiny-llama}", f"checkpoint: {{path: {tmp_path / 'ck'}}}")
    (tmp_path / "v.yaml").write_text(text.replace("engine_args:", f"engine_args:\n  quantization: {wanted}", 1))
    r = cli("plan", tmp_path / "v.yaml")
    assert r.exit_code == code, r.stderr
    if code:
        assert f"quant_method {method!r}" in r.stderr
