from __future__ import annotations

import pytest

from tritonbuild.backends.tensorrtllm.memory import Architecture, kv_bytes_per_token, memory_plan, weight_bytes
from tritonbuild.recipe.llm import LLMRecipe

LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
             "num_hidden_layers": 32, "num_key_value_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096}
LLAMA3_70B = {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64,
              "num_hidden_layers": 80, "num_key_value_heads": 8, "vocab_size": 128256}


def _recipe(**kw) -> LLMRecipe:
    return LLMRecipe(name="m", version=1, backend="tensorrtllm", checkpoint={"path": "c"}, **kw)


def test_llama2_7b_fp16_kv_is_half_a_mib_per_token():
    arch = Architecture.from_hf_config(LLAMA2_7B)
    assert kv_bytes_per_token(arch, "auto") == 512 * 1024
    assert kv_bytes_per_token(arch, "fp8") == 256 * 1024


def test_llama2_7b_parameter_count_and_weight_bytes():
    arch = Architecture.from_hf_config(LLAMA2_7B)
    params, fp16 = weight_bytes(arch, "none")
    assert params == 6_738_415_616  # the published Llama-2-7B count
    assert fp16 == 2 * params
    _, int4 = weight_bytes(arch, "int4_weight_only")
    linear = params - 2 * 32000 * 4096 - 65 * 4096
    # int4 linears + fp16 per-output-channel scales + fp16 embeddings/lm_head/norms
    scales = 32 * (4096 * 4 + 11008 * 2 + 4096) * 2
    assert int4 == linear // 2 + scales + (params - linear) * 2
    _, awq = weight_bytes(arch, "int4_awq")
    assert awq > int4  # group-wise scales (128) + pre-quant scales cost more than per-channel ones


def test_gqa_kv_heads_shrink_the_cache():
    arch = Architecture.from_hf_config(LLAMA3_70B)
    assert kv_bytes_per_token(arch, "auto") == 2 * 80 * 8 * 128 * 2  # 320 KiB


def test_plan_counts_tokens_and_sequences():
    arch = Architecture.from_hf_config(LLAMA2_7B)
    plan = memory_plan(_recipe(gpu="A100-80", quantization="int4_weight_only",
                               kv_cache={"free_gpu_mem_fraction": 0.9, "tokens_per_block": 64},
                               engine={"max_seq_len": 4096, "max_input_len": 2048}), arch)
    assert plan.fits and plan.weight_bytes_per_gpu < 4 << 30
    assert plan.max_kv_tokens == plan.kv_pool_bytes_per_gpu // (512 * 1024)
    assert plan.max_sequences_at_max_seq_len == (plan.max_kv_tokens // 64) // 64


def test_weights_that_do_not_fit():
    arch = Architecture.from_hf_config(LLAMA3_70B)
    plan = memory_plan(_recipe(gpu="T4", quantization="none"), arch)
    assert not plan.fits and "exceed the T4's 16 GiB" in plan.notes[0]
    assert memory_plan(_recipe(gpu="H200", quantization="int4_weight_only"), arch).fits


def test_tensor_parallel_splits_weights_and_kv():
    arch = Architecture.from_hf_config(LLAMA3_70B)
    one = memory_plan(_recipe(gpu="H100", quantization="fp8", engine={"tp_size": 1}), arch)
    two = memory_plan(_recipe(gpu="H100", quantization="fp8", engine={"tp_size": 2},
                              serving={"gpu_device_ids": [0, 1]}), arch)
    assert two.weight_bytes_per_gpu == pytest.approx(one.weight_bytes_per_gpu / 2, abs=1)
    assert two.kv_bytes_per_token_per_gpu == one.kv_bytes_per_token_per_gpu // 2
