from __future__ import annotations

import pytest

from tritonbuild.backends.llm.memory import Architecture, kv_bytes_per_token
from tritonbuild.backends.tensorrtllm.memory import memory_plan, weight_bytes
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe

LLAMA2_7B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
}
LLAMA3_70B = {
    "model_type": "llama",
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_attention_heads": 64,
    "num_hidden_layers": 80,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
}


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
    plan = memory_plan(
        _recipe(
            gpu="A100-80",
            quantization="int4_weight_only",
            kv_cache={"free_gpu_mem_fraction": 0.9, "tokens_per_block": 64},
            engine={"max_seq_len": 4096, "max_input_len": 2048},
        ),
        arch,
    )
    assert plan.fits and plan.weight_bytes_per_gpu < 4 << 30
    assert plan.max_kv_tokens == plan.kv_pool_bytes_per_gpu // (512 * 1024)
    assert plan.max_sequences_at_max_seq_len == (plan.max_kv_tokens // 64) // 64


def test_a_speculative_engines_sequences_hold_the_draft_tokens_trtllm_build_adds():
    """trtllm-build adds max_draft_len to max_seq_len (facts/trtllm_speculative.json draft_limits.max_seq_len): each
    sequence's KV blocks are counted at that length."""
    from tests.contracts.facts import load

    arch = Architecture.from_hf_config(LLAMA2_7B)
    kw = {
        "gpu": "A100-80",
        "quantization": "int4_weight_only",
        "engine": {"max_seq_len": 4096, "max_input_len": 2048},
        "kv_cache": {"free_gpu_mem_fraction": 0.9, "tokens_per_block": 64},
    }
    plan = memory_plan(
        _recipe(
            **kw,
            speculative={
                "mode": "lookahead",
                "window_size": 7,
                "ngram_size": 7,
                "verification_set_size": 7,
            },
        ),
        arch,
    )
    seq = eval(
        load("trtllm_speculative")["draft_limits"]["max_seq_len"]["formula_python"],
        {},
        {"max_seq_len": 4096, "max_draft_len": 83},
    )
    assert plan.max_sequences_at_max_seq_len == (plan.max_kv_tokens // 64) // -(-seq // 64)
    assert (
        plan.max_sequences_at_max_seq_len
        < memory_plan(_recipe(**kw), arch).max_sequences_at_max_seq_len
    )


def test_weights_that_do_not_fit():
    arch = Architecture.from_hf_config(LLAMA3_70B)
    plan = memory_plan(_recipe(gpu="T4", quantization="none"), arch)
    assert not plan.fits and "exceed the T4's 15.0 GiB" in plan.notes[0]
    assert memory_plan(_recipe(gpu="H200", quantization="int4_weight_only"), arch).fits


def test_tensor_parallel_splits_weights_and_kv():
    arch = Architecture.from_hf_config(LLAMA3_70B)
    one = memory_plan(_recipe(gpu="H100", quantization="fp8", engine={"tp_size": 1}), arch)
    two = memory_plan(
        _recipe(
            gpu="H100",
            quantization="fp8",
            engine={"tp_size": 2},
            serving={"gpu_device_ids": [0, 1]},
        ),
        arch,
    )
    whole = (
        128256 * 8192 * 2 + (2 * 80 + 1) * 8192 * 2
    )  # input embedding and norms stay whole on each rank
    assert two.weight_bytes_per_gpu == pytest.approx(
        (one.weight_bytes_per_gpu - whole) / 2 + whole, abs=1
    )
    assert two.kv_bytes_per_token_per_gpu == one.kv_bytes_per_token_per_gpu // 2


# Config spellings as the published checkpoints write them (config.json of each repository on the HF hub).
GPT2 = {
    "model_type": "gpt2",
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_positions": 1024,
    "vocab_size": 50257,
}
FALCON_7B = {
    "model_type": "falcon",
    "hidden_size": 4544,
    "n_head": 71,
    "n_layer": 32,
    "multi_query": True,
    "parallel_attn": True,
    "vocab_size": 65024,
}
FALCON_40B = {
    "model_type": "falcon",
    "hidden_size": 8192,
    "n_head": 128,
    "n_head_kv": 8,
    "n_layer": 60,
    "new_decoder_architecture": True,
    "vocab_size": 65024,
}
MIXTRAL_8X7B = {
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 32000,
}
QWEN2_7B = {
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
}
DEEPSEEK_V2_LITE = {
    "model_type": "deepseek_v2",
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_hidden_layers": 27,
    "num_key_value_heads": 16,
    "kv_lora_rank": 512,
    "q_lora_rank": None,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "intermediate_size": 10944,
    "moe_intermediate_size": 1408,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "first_k_dense_replace": 1,
    "vocab_size": 102400,
}


def test_gpt2_spelling_is_read_and_gpt2_small_has_its_published_124m_parameters():
    arch = Architecture.from_hf_config(GPT2)
    assert (arch.hidden, arch.heads, arch.layers, arch.kv_heads, arch.tied_embeddings) == (
        768,
        12,
        12,
        12,
        True,
    )
    params, _ = weight_bytes(arch, "none")
    # 124,439,808 published, less what the plan leaves out: 1024 × 768 learned position embeddings and the
    # biases (12 layers × (2304 + 768 + 3072 + 768 + 2 × 768 LayerNorm) + 768 final LayerNorm = 102,144)
    assert params == 124_439_808 - 1024 * 768 - 102_144


def test_falcon_kv_heads_follow_multi_query_and_n_head_kv():
    assert Architecture.from_hf_config(FALCON_7B).kv_heads == 1  # multi-query: one KV head, not 71
    assert Architecture.from_hf_config(FALCON_40B).kv_heads == 8
    assert kv_bytes_per_token(Architecture.from_hf_config(FALCON_7B), "auto") == 2 * 32 * 1 * 64 * 2


def test_moe_counts_every_expert():
    params, _ = weight_bytes(Architecture.from_hf_config(MIXTRAL_8X7B), "none")
    assert params == pytest.approx(
        46.7e9, rel=0.005
    )  # Mixtral 8x7B: 46.7B total parameters (published)


def test_kv_heads_per_rank_round_up_when_tp_exceeds_them():
    arch = Architecture.from_hf_config(QWEN2_7B)  # 4 KV heads
    assert (
        kv_bytes_per_token(arch, "auto", tp=8) == 2 * 28 * 1 * 128 * 2
    )  # 14,336: ceil(4/8) = 1 head per rank
    plan = memory_plan(
        _recipe(
            quantization="none", engine={"tp_size": 8}, serving={"gpu_device_ids": list(range(8))}
        ),
        arch,
    )
    assert plan.kv_bytes_per_token_per_gpu == 14336


def test_mla_caches_one_latent_per_layer():
    arch = Architecture.from_hf_config(DEEPSEEK_V2_LITE)
    assert (
        kv_bytes_per_token(arch, "auto") == 27 * (512 + 64) * 2
    )  # (d_c + d_h^R) per layer, DeepSeek-V2 paper
    assert kv_bytes_per_token(arch, "auto", tp=4) == kv_bytes_per_token(
        arch, "auto"
    )  # every rank keeps it
    params, _ = weight_bytes(arch, "none")
    assert params == pytest.approx(
        15.7e9, rel=0.02
    )  # DeepSeek-V2-Lite: 15.7B total parameters (published)


def test_gpu_sizes_are_binary_gib():
    plan = memory_plan(_recipe(gpu="H200"), Architecture.from_hf_config(LLAMA2_7B))
    assert plan.gpu_bytes == 143_771 * 2**20  # nvidia-smi on the lent H200: 143,771 MiB = 140.4 GiB


QWEN2_72B = {
    "model_type": "qwen2",
    "hidden_size": 8192,
    "intermediate_size": 29568,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "num_hidden_layers": 80,
    "vocab_size": 152064,
    "tie_word_embeddings": False,
}


def test_tensor_parallel_keeps_the_input_embedding_whole_on_every_rank_unless_parallel_embedding():
    """TensorRT-LLM's converters default use_parallel_embedding to false: every rank holds the 16-bit input
    embedding (and the norms) whole; the linears and lm_head split. Qwen2-72B int4 tp8, by hand."""
    arch = Architecture.from_hf_config(QWEN2_72B)
    r = _recipe(
        quantization="int4_weight_only",
        engine={"tp_size": 8},
        serving={"gpu_device_ids": list(range(8))},
    )
    plan = memory_plan(r, arch)
    assert plan.weight_bytes == 40_105_517_056  # the audit's hand figure for the whole model
    embed, norms = 152064 * 8192 * 2, (2 * 80 + 1) * 8192 * 2
    by_hand = (40_105_517_056 - embed - norms) / 8 + embed + norms  # = 7,195,487,232 B (6.70 GiB)
    assert abs(plan.weight_bytes_per_gpu - by_hand) / by_hand < 0.01
    split = memory_plan(
        _recipe(
            quantization="int4_weight_only",
            serving={"gpu_device_ids": list(range(8))},
            engine={"tp_size": 8, "use_parallel_embedding": True},
        ),
        arch,
    )
    assert abs(split.weight_bytes_per_gpu - ((40_105_517_056 - norms) / 8 + norms)) < 8
    assert split.max_kv_tokens > plan.max_kv_tokens


@pytest.mark.parametrize(
    "config, tp, ok",
    [
        (
            {
                "model_type": "falcon",
                "hidden_size": 4544,
                "num_attention_heads": 71,
                "num_hidden_layers": 32,
                "multi_query": True,
                "vocab_size": 65024,
            },
            2,
            False,
        ),
        (QWEN2_72B, 8, True),
        (QWEN2_72B, 16, True),
        (QWEN2_72B, 3, False),
        (
            {**QWEN2_72B, "num_attention_heads": 32, "num_key_value_heads": 6},
            4,
            False,
        ),  # query heads split, KV not
        (LLAMA3_70B, 1, True),
    ],
)
def test_heads_per_rank(config, tp, ok):
    from tritonbuild.backends.llm.memory import tp_heads_problem

    problem = tp_heads_problem(Architecture.from_hf_config(config), tp)
    assert (problem is None) == ok, problem
    if problem and config["num_attention_heads"] % tp:
        assert f"{config['num_attention_heads']} attention heads" in problem
    elif problem:
        assert "6 KV heads (of 32 heads)" in problem and "vLLM" not in problem


def test_starcoder_is_multi_query_with_a_plain_mlp():
    """gpt_bigcode (StarCoder): one KV head (multi_query) and a two-matrix MLP (c_fc, c_proj)."""
    arch = Architecture.from_hf_config(
        {
            "model_type": "gpt_bigcode",
            "n_embd": 6144,
            "n_head": 48,
            "n_layer": 40,
            "n_inner": 24576,
            "vocab_size": 49152,
            "multi_query": True,
        }
    )
    assert arch.kv_heads == 1 and kv_bytes_per_token(arch, "auto") == 2 * 40 * 1 * 128 * 2
    per_layer = 2 * 6144 * 6144 + 2 * 6144 * 128 + 2 * 6144 * 24576
    assert sum(i * o for i, o in arch.linear_shapes()) == 40 * per_layer


def test_medusa_heads_weights_are_added_to_the_plan():
    """Their safetensors' size, split over the ranks like the target's (tests/cli/test_llm.py reads it from disk)."""
    arch = Architecture.from_hf_config(LLAMA2_7B)
    r = _recipe(quantization="none", engine={"tp_size": 2})
    plain, medusa = memory_plan(r, arch), memory_plan(r, arch, heads_bytes=3 * 2**20)
    assert medusa.weight_bytes == plain.weight_bytes + 3 * 2**20
    assert medusa.weight_bytes_per_gpu == plain.weight_bytes_per_gpu + 3 * 2**20 // 2
    assert medusa.kv_bytes_per_token == plain.kv_bytes_per_token  # heads keep no KV cache
