"""Which decoder linears the invariant W4A16 kernel takes (backends/vllm/invariant/shapes.py): the rule plan applies
is the plugin's own (`supported`, behind its can_implement), and the layers it reads from config.json are the ones
vLLM's Llama-family models build (in_features per tensor-parallel rank)."""

from __future__ import annotations

import itertools
import json

import pytest

from benchmarks.vllm.tiny_llama import LLAMA3_8B as LLAMA_3_8B
from tests.conftest import EXAMPLES
from tests.unit.backends.test_vllm_invariant import _plugin
from tritonbuild.backends.llm.memory import Architecture
from tritonbuild.backends.vllm.invariant import shapes


def test_plans_rule_is_the_plugins_rule():
    plugin = _plugin()
    assert shapes.LAYOUT_K == plugin.LAYOUT_K
    for k, group in itertools.product(
        (64, 96, 128, 192, 256, 896, 3584, 4000, 14336), (16, 32, 48, 64, 128)
    ):
        assert (shapes.refusal(k, group) is None) == (plugin.supported(k, group) is None), (
            k,
            group,
        )


def test_a_channelwise_group_is_the_whole_row():
    assert shapes.refusal(4096, -1) is None and shapes.refusal(4000, -1)


def test_llama_3_8b_linears_per_rank():
    arch = Architecture.from_hf_config(LLAMA_3_8B)
    assert shapes.linear_inputs(arch) == {
        "o_proj": 4096,
        "qkv_proj": 4096,
        "gate_up_proj": 4096,
        "down_proj": 14336,
    }
    assert shapes.linear_inputs(arch, tp=2) == {
        "o_proj": 2048,
        "qkv_proj": 4096,
        "gate_up_proj": 4096,
        "down_proj": 7168,
    }
    assert all(shapes.refusal(k, 128) is None for k in shapes.linear_inputs(arch, 8).values())


def test_the_bundled_tiny_llama_is_too_narrow_for_the_kernel():
    arch = Architecture.from_hf_config(
        json.loads((EXAMPLES / "tiny-llama" / "config.json").read_text())
    )
    refused = {n: shapes.refusal(k, 32) for n, k in shapes.linear_inputs(arch).items()}
    assert refused["qkv_proj"] == "K 64 with group size 32" and refused["down_proj"] is None


@pytest.mark.parametrize("strategy, group_size, want", [("group", 64, 64), ("channel", None, -1)])
def test_a_compressed_tensors_checkpoints_group(strategy, group_size, want):
    weights = {"num_bits": 4, "strategy": strategy, "group_size": group_size}
    config = {
        "quantization_config": {
            "quant_method": "compressed-tensors",
            "config_groups": {"g": {"weights": weights}},
        }
    }

    class Recipe:
        quantize = None

    assert shapes.int4_group(Recipe, config) == want
    assert shapes.int4_group(Recipe, {}) is None
