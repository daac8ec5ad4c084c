"""model.yaml holds on every TensorRT-LLM version whose LLM-API arguments are recorded (facts/llm_args.json): the 1.x
version the facts were first read from and TensorRT-LLM main at 0004396 (at_main), field by field."""

from __future__ import annotations

import pytest

from tests.contracts.facts import load
from tritonbuild.backends.tensorrtllm.checks.recipe import check_recipe
from tritonbuild.backends.tensorrtllm.llmapi.emit import model_yaml
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe

ARGS = load("llm_args")
VERSIONS = {"1.x": ARGS, "main@0004396": ARGS["at_main"]}
RECIPES = [
    {"quantization": "none"},
    {"quantization": "fp8", "kv_cache": {"dtype": "fp8", "max_tokens": 4096}},
    {"quantization": "int4_awq", "serving": {"streaming": True}},
    {
        "quantization": "none",
        "engine": {"tp_size": 2, "pp_size": 2},
        "serving": {"gpu_device_ids": [0, 1, 2, 3]},
    },
]


@pytest.mark.parametrize("version", sorted(VERSIONS))
@pytest.mark.parametrize("kw", RECIPES)
def test_model_yaml_keys_are_llm_api_fields_of_each_recorded_version(version, kw):
    r = LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        runtime="pytorch",
        checkpoint={"path": "c"},
        **kw,
    )
    assert check_recipe(r) == []
    spec, facts = model_yaml(r), VERSIONS[version]
    top = set(spec) - set(ARGS["model_yaml_triton_keys"]["keys"])
    assert top <= set(facts["TorchLlmArgs"]), top - set(facts["TorchLlmArgs"])
    assert set(spec["kv_cache_config"]) <= set(facts["KvCacheConfig"]["fields"])


def test_the_trt_engine_only_arguments_are_no_pytorch_fields_on_main():
    assert not set(ARGS["TrtLlmArgs_only"]["fields"]) & set(ARGS["at_main"]["TorchLlmArgs"])


def test_main_keeps_the_kv_cache_defaults_the_recipe_documents():
    assert ARGS["at_main"]["KvCacheConfig"]["defaults"] == {
        **ARGS["KvCacheConfig"]["defaults"],
        "dtype": "auto",
    }
    assert ARGS["at_main"]["BaseLlmArgs_defaults"]["dtype"] == "auto"


def test_the_llmapi_models_extensions_rest_on_the_llm_apis_own_fields():
    """What the generated LLM-API model has beyond upstream's llmapi template: min_tokens (SamplingParams) and the
    token counts (RequestOutput.prompt_token_ids, CompletionOutput.token_ids), under the names the OpenAI frontend
    reads usage from."""
    from tests.contracts.facts import template
    from tritonbuild.backends.tensorrtllm.llmapi.tensors import (
        EXT_INPUTS,
        EXT_OUTPUTS,
        INPUTS,
        OUTPUTS,
    )

    request, clients = ARGS["request"], load("clients")["openai_frontend"]
    upstream = {t["name"] for t in template("llmapi")["inputs"] + template("llmapi")["outputs"]}
    assert (
        not {t.name for t in EXT_INPUTS + EXT_OUTPUTS} & upstream
    )  # extensions, not upstream's names
    assert not {t.name for t in EXT_INPUTS + EXT_OUTPUTS} & {t.name for t in INPUTS + OUTPUTS}
    assert (
        EXT_INPUTS[0].name == "sampling_param_min_tokens"
        and "min_tokens" in request["sampling_params"]
    )
    fields = set(
        request["sampling_params"]["fields"]
    )  # each extension input sets the SamplingParams field it names
    assert all(t.name.startswith("sampling_param_") for t in EXT_INPUTS)
    assert {t.name.removeprefix("sampling_param_") for t in EXT_INPUTS} <= fields
    assert [t.name for t in EXT_OUTPUTS] == clients["usage"]["outputs"]
    assert {t.dtype for t in EXT_OUTPUTS} == {"int32"} and "TYPE_INT32" in clients["usage"][
        "dtypes"
    ]
    assert "prompt_token_ids" in request["request_output"]["fields"]
    assert "token_ids" in request["completion_output"]["fields"]


def test_model_yaml_needs_the_llm_api_of_1_0_which_the_route_requires():
    """The one llm_args.py the code index names a commit for (stored_with_commit, before 1.0) has no
    KvCacheConfig.tokens_per_block or dtype and would drop them silently; model.yaml writes tokens_per_block, so the
    LLM-API route is refused below TensorRT-LLM 1.0 (runtime: pytorch) and never chosen there (runtime: auto)."""
    old = ARGS["stored_with_commit"]
    r = LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        runtime="pytorch",
        checkpoint={"path": "c"},
        quantization="fp8",
        kv_cache={"dtype": "fp8"},
    )
    assert {"tokens_per_block", "dtype"} <= set(model_yaml(r)["kv_cache_config"])
    assert not {"tokens_per_block", "dtype"} & set(old["KvCacheConfig_fields"])
    assert {"tokens_per_block", "dtype"} <= set(ARGS["KvCacheConfig"]["fields"])
    image = {"triton_image": "nvcr.io/nvidia/tritonserver:25.08-trtllm-python-py3"}
    pinned = LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        runtime="pytorch",
        checkpoint={"path": "c"},
        image=image,
    )
    assert [p for p in check_recipe(pinned) if p[0] == ("runtime",)]
    auto = LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        runtime="auto",
        checkpoint={"path": "c"},
        image=image,
    )
    assert auto.runtime == "engine" and "predates" in auto.route_why
