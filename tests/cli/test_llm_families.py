"""LLM families on the engine route: the converter each checkpoint's model_type takes (facts:
trtllm_scripts.json model_types_source), its pipeline limit, heads vs tensor parallelism, and the route to take
where upstream has no converter (trtllm_quantization.json engine_route_lacks)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import EXAMPLES, route_recipe
from tests.contracts.facts import load, script_for

BASE = {
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "intermediate_size": 128,
    "vocab_size": 384,
    "max_position_embeddings": 512,
    "torch_dtype": "float16",
    "rms_norm_eps": 1e-6,
}
CONFIGS = {
    "qwen2_moe": {
        "num_experts": 4,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 64,
    },
    "qwen3": {"head_dim": 16},
    "qwen3_moe": {"head_dim": 16, "num_experts": 4, "moe_intermediate_size": 32},
    "gemma2": {"head_dim": 16, "query_pre_attn_scalar": 16},
    "gemma3_text": {"head_dim": 16, "query_pre_attn_scalar": 16},
    "phimoe": {"num_local_experts": 4},
    "gpt_bigcode": {"n_embd": 64, "n_head": 4, "n_layer": 2, "multi_query": True},
    "starcoder2": {},
}
DEEPSEEK_V3 = {
    "kv_lora_rank": 16,
    "q_lora_rank": 0,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 16,
    "n_routed_experts": 4,
    "moe_intermediate_size": 32,
    "n_shared_experts": 1,
    "first_k_dense_replace": 1,
}


@pytest.fixture
def llm_dir(tmp_path):
    shutil.copytree(EXAMPLES / "tiny-llama", tmp_path / "tiny-llama")
    shutil.copy(EXAMPLES / "tiny-llama-int4.yaml", tmp_path / "llm.yaml")
    return tmp_path


def _family(llm_dir, model_type: str, extra: dict, recipe: str = "") -> None:
    (llm_dir / "tiny-llama" / "config.json").write_text(
        json.dumps({**BASE, **extra, "model_type": model_type})
    )
    if recipe:
        text = (llm_dir / "llm.yaml").read_text()
        (llm_dir / "llm.yaml").write_text(
            route_recipe(text.replace("quantization: int4_weight_only", recipe))
        )


@pytest.mark.parametrize("model_type", sorted(CONFIGS))
def test_each_family_plans_with_its_converter(cli, llm_dir, model_type):
    _family(llm_dir, model_type, CONFIGS[model_type])
    r = cli("plan", llm_dir / "llm.yaml", "--json")
    assert r.exit_code == 0, r.stderr
    (m,) = json.loads(r.stdout)["models"]
    (engine,) = [s for s in m["steps"] if s["kind"] == "trtllm.engine"]
    assert engine["params"]["model_type"] == model_type
    name, facts = script_for(model_type)
    assert model_type in facts.get("model_types_source", {}) or model_type == name
    assert m["extras"]["memory_plan"]["weight_bytes"] > 0


@pytest.mark.parametrize("model_type", ["gemma3_text", "phimoe"])
def test_pipeline_parallelism_is_refused_where_the_converter_has_none(cli, llm_dir, model_type):
    _family(llm_dir, model_type, CONFIGS[model_type])
    text = (
        (llm_dir / "llm.yaml")
        .read_text()
        .replace("max_beam_width: 1", "max_beam_width: 1\n  pp_size: 2")
    )
    (llm_dir / "llm.yaml").write_text(
        text.replace(
            "repository_mount: /models", "repository_mount: /models\n  gpu_device_ids: [0, 1]"
        )
    )
    r = cli("plan", llm_dir / "llm.yaml")
    assert r.exit_code == 3 and "engine.pp_size" in r.stderr and model_type in r.stderr, r.stderr


def test_tensor_parallelism_must_divide_a_new_familys_heads(cli, llm_dir):
    _family(llm_dir, "qwen3_moe", CONFIGS["qwen3_moe"])
    text = (
        (llm_dir / "llm.yaml")
        .read_text()
        .replace("max_beam_width: 1", "max_beam_width: 1\n  tp_size: 8")
    )
    (llm_dir / "llm.yaml").write_text(
        text.replace(
            "repository_mount: /models",
            f"repository_mount: /models\n  gpu_device_ids: {list(range(8))}",
        )
    )
    r = cli("plan", llm_dir / "llm.yaml")
    assert r.exit_code == 3 and "qwen3_moe's 4 attention heads" in r.stderr, r.stderr


def test_a_family_without_an_engine_converter_names_the_llm_api(cli, llm_dir):
    lacks = load("trtllm_quantization")["engine_route_lacks"]["model_types"]
    assert "deepseek_v3" in lacks
    _family(llm_dir, "deepseek_v3", DEEPSEEK_V3)
    r = cli("plan", llm_dir / "llm.yaml")
    assert r.exit_code == 3 and "set runtime: pytorch" in r.stderr and "deepseek_v3" in r.stderr, (
        r.stderr
    )
    text = (llm_dir / "llm.yaml").read_text()
    (llm_dir / "llm.yaml").write_text(
        route_recipe(
            text.replace("quantization: int4_weight_only", "quantization: none\nruntime: pytorch")
        )
    )
    r = cli("plan", llm_dir / "llm.yaml", "--json")
    assert r.exit_code == 0, r.stderr
    (m,) = json.loads(r.stdout)["models"]
    assert m["extras"]["architecture"]["kv_lora_rank"] == 16
