"""vLLM's memory plan on the recipe's GPU (the plan's extras): the KV cache blocks left once the
weights and vLLM's runtime reserve are placed, from the checkpoint's config.json and its weights'
sizes."""

from __future__ import annotations

import json
from pathlib import Path

from tritonbuild.backends.base import PlanContext
from tritonbuild.backends.llm.checkpoint import recipe_dir
from tritonbuild.backends.llm.gpus import GPU_MEMORY_MIB
from tritonbuild.backends.llm.memory import (
    GIB,
    Architecture,
    MemoryPlan,
    kv_bytes_per_token,
    model_weight_bytes,
)
from tritonbuild.backends.vllm.emit import model_json
from tritonbuild.backends.vllm.quantize import step as quant
from tritonbuild.backends.vllm.recipe import VLLMRecipe
from tritonbuild.backends.vllm.speculative import draft_dir, draft_kv_config
from tritonbuild.core.stores import is_url
from tritonbuild.recipe.load import LoadedRecipe

# What Worker.determine_available_memory takes beyond the weights before the KV cache: the profiling
# run's activations and the CUDA/NCCL context growth (measured on the H200:
# docs/runs/2026-12-01-vllm-h200.json).
VLLM_RUNTIME_RESERVE = int(1.5 * (1 << 30))


def weight_bytes_on_disk(ckpt: Path) -> int:
    """Bytes of the checkpoint's safetensors: what vLLM puts on the GPU for a dense or pre-quantized
    checkpoint."""
    return sum(f.stat().st_size for f in ckpt.glob("*.safetensors"))


def memory_plan(
    recipe: VLLMRecipe, config: dict, weights: int | None = None, draft: dict | None = None
) -> dict:
    """vLLM's KV budget (Worker.determine_available_memory): gpu_memory_utilization × the GPU's
    memory, less the weights and what the profiling run adds (activations of max_num_batched_tokens,
    CUDA/NCCL context), split into blocks of block_size tokens × layers × 2 × kv_heads × head_dim ×
    dtype bytes; draft: the drafter's config.json, whose attention layers take KV in the same blocks
    (split across GPUs as the target's)."""
    arch = Architecture.from_hf_config(config)
    e = recipe.engine_args
    params, computed = model_weight_bytes(arch)
    wbytes = computed if weights is None else weights
    gpu = GPU_MEMORY_MIB[recipe.gpu] * (1 << 20)
    kv_dtype = "fp8" if str(e.extra.get("kv_cache_dtype", "auto")).startswith("fp8") else "auto"
    drafter = [(Architecture.from_hf_config(draft), "auto")] if draft is not None else []
    # one GPU's KV per token (what the blocks are cut by), and the whole model's (the plan's
    # kv_bytes_per_token, as on the TensorRT-LLM routes)
    kv_tok = sum(
        kv_bytes_per_token(a, d, e.tensor_parallel_size, e.pipeline_parallel_size)
        for a, d in [(arch, kv_dtype), *drafter]
    )
    kv_whole = sum(kv_bytes_per_token(a, d) for a, d in [(arch, kv_dtype), *drafter])
    w_gpu = -(-wbytes // (e.tensor_parallel_size * e.pipeline_parallel_size))
    pool = max(0, int(gpu * e.gpu_memory_utilization) - w_gpu - VLLM_RUNTIME_RESERVE)
    blocks = pool // (kv_tok * e.block_size)
    seq = e.max_model_len or arch.max_position_embeddings or 0
    seqs = blocks // -(-seq // e.block_size) if seq else 0
    notes = (
        []
        if pool
        else [
            f"weights ({w_gpu / GIB:.2f} GiB) and vLLM's reserve exceed gpu_memory_utilization "
            f"{e.gpu_memory_utilization} of the {recipe.gpu}"
        ]
    )
    plan = MemoryPlan(
        gpu=recipe.gpu,
        gpu_bytes=gpu,
        quantization=model_json(recipe).get("quantization", "none"),
        params=params,
        weight_bytes=wbytes,
        weight_bytes_per_gpu=w_gpu,
        kv_bytes_per_token=kv_whole,
        kv_bytes_per_token_per_gpu=kv_tok,
        kv_pool_bytes_per_gpu=pool,
        max_kv_tokens=blocks * e.block_size,
        max_sequences_at_max_seq_len=seqs,
        fits=pool > 0,
        notes=notes,
    )
    return {**plan.model_dump(), "block_size": e.block_size, "kv_blocks": blocks}


def describe(loaded: LoadedRecipe, ctx: PlanContext | None = None) -> dict:
    """Plan extras: vLLM's KV blocks on the recipe's GPU (from config.json and the safetensors'
    sizes)."""
    if is_url(loaded.recipe.checkpoint.path):
        return {}
    ckpt = recipe_dir(loaded, loaded.recipe.checkpoint.path, ("checkpoint", "path"))
    try:
        config = json.loads((ckpt / "config.json").read_text())
        arch = Architecture.from_hf_config(config)
    except (OSError, ValueError, KeyError):
        return {}
    draft = draft_dir(loaded, recipe_dir)  # its weights share the GPU with the model's
    draft_bytes = weight_bytes_on_disk(draft) if draft else 0
    weights = (quant.weight_bytes(loaded.recipe, ckpt, weight_bytes_on_disk) + draft_bytes) or None
    plan = memory_plan(loaded.recipe, config, weights, draft_kv_config(loaded, draft))
    return {"architecture": arch.model_dump(), "memory_plan": plan}
