"""model.yaml holds on every TensorRT-LLM version whose LLM-API arguments are recorded (facts/llm_args.json): the 1.x
version the facts were first read from and TensorRT-LLM main at 0004396 (at_main), field by field."""

from __future__ import annotations

import pytest

from tests.contracts.facts import load
from tritonbuild.backends.tensorrtllm.checks import check_recipe
from tritonbuild.backends.tensorrtllm.llmapi import model_yaml
from tritonbuild.backends.tensorrtllm.recipe import LLMRecipe

ARGS = load("llm_args")
VERSIONS = {"1.x": ARGS, "main@0004396": ARGS["at_main"]}
RECIPES = [{"quantization": "none"}, {"quantization": "fp8", "kv_cache": {"dtype": "fp8", "max_tokens": 4096}},
           {"quantization": "int4_awq", "serving": {"streaming": True}},
           {"quantization": "none", "engine": {"tp_size": 2, "pp_size": 2}}]


@pytest.mark.parametrize("version", sorted(VERSIONS))
@pytest.mark.parametrize("kw", RECIPES)
def test_model_yaml_keys_are_llm_api_fields_of_each_recorded_version(version, kw):
    r = LLMRecipe(name="m", version=1, backend="tensorrtllm", runtime="pytorch", checkpoint={"path": "c"}, **kw)
    if check_recipe(r):
        pytest.skip("refused at load")
    spec, facts = model_yaml(r), VERSIONS[version]
    top = set(spec) - set(ARGS["model_yaml_triton_keys"]["keys"])
    assert top <= set(facts["TorchLlmArgs"]), top - set(facts["TorchLlmArgs"])
    assert set(spec["kv_cache_config"]) <= set(facts["KvCacheConfig"]["fields"])


def test_the_trt_engine_only_arguments_are_no_pytorch_fields_on_main():
    assert not set(ARGS["TrtLlmArgs_only"]["fields"]) & set(ARGS["at_main"]["TorchLlmArgs"])


def test_main_keeps_the_kv_cache_defaults_the_recipe_documents():
    assert ARGS["at_main"]["KvCacheConfig"]["defaults"] == {**ARGS["KvCacheConfig"]["defaults"], "dtype": "auto"}
    assert ARGS["at_main"]["BaseLlmArgs_defaults"]["dtype"] == "auto"
