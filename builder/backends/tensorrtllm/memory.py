"""TensorRT-LLM's GPU memory plan: weights by its quantization formats, KV cache per token, what
fits on the target GPU. The architecture and the shared arithmetic are the LLM layer's
(backends/llm/memory.py). Figures are estimates of the kind TensorRT-LLM's own allocator makes
(weights, then free_gpu_mem_fraction of what is left for KV); KV per GPU follows KVCacheManager.
"""

from __future__ import annotations

import math

from tritonbuild.backends.llm.gpus import GPU_MEMORY_GIB, GPU_MEMORY_MIB
from tritonbuild.backends.llm.memory import (
    GIB,
    MIB,
    Architecture,
    MemoryPlan,
    kv_bytes_per_token,
    model_weight_bytes,
)
from tritonbuild.backends.tensorrtllm.quant import linear_bytes
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
from tritonbuild.backends.tensorrtllm.speculative import built_limits

# CUDA context, activations, TRT workspace: a conservative allowance
RUNTIME_RESERVE = int(1.5 * GIB)


def weight_bytes(
    arch: Architecture, quantization: str, group_size: int = 128, zero_point: bool = False
) -> tuple[int, int]:
    """(parameter count, bytes): the linear layers in the quantization's format with its scales
    (quant.linear_bytes), embeddings, lm_head and norms in 16-bit."""
    return model_weight_bytes(
        arch, lambda linears: linear_bytes(linears, quantization, group_size, zero_point)
    )


def memory_plan(
    r: LLMRecipe,
    arch: Architecture,
    prequant: dict | None = None,
    draft: Architecture | None = None,
    heads_bytes: int = 0,
    draft_bytes: int | None = None,
) -> MemoryPlan:
    """prequant: a checkpoint quantized already (quant.Prequantized.params()): its group size and
    zero points. draft: a speculative-decoding draft model (or EAGLE head), 16-bit, split like the
    target; its KV cache holds the same tokens as the target's, so each token costs both.
    heads_bytes: Medusa heads' weights (their safetensors), split like the target's; they keep no
    KV cache. draft_bytes: the draft's weights as its files hold them, where they are not a whole
    model's (an EAGLE head: no embedding, maybe no lm_head)."""
    e, kv = r.engine, r.kv_cache
    shards = e.tp_size * e.pp_size
    gpu_bytes = GPU_MEMORY_MIB[r.gpu] * MIB
    params, wbytes = weight_bytes(
        arch,
        r.quantization,
        **{k: v for k, v in (prequant or {}).items() if k in ("group_size", "zero_point")},
    )
    w_gpu = _weights_per_gpu(arch, e, wbytes)
    kv_tok = kv_bytes_per_token(arch, kv.dtype)
    kv_tok_gpu = kv_bytes_per_token(arch, kv.dtype, e.tp_size, e.pp_size)
    if draft is not None:
        d_params, d_bytes = weight_bytes(draft, "none")
        if draft_bytes is not None:
            d_params, d_bytes = draft_bytes // 2, draft_bytes
        params, wbytes = params + d_params, wbytes + d_bytes
        w_gpu += math.ceil(d_bytes / shards)
        kv_tok += kv_bytes_per_token(draft, kv.dtype)
        kv_tok_gpu += kv_bytes_per_token(draft, kv.dtype, e.tp_size, e.pp_size)
    wbytes, w_gpu = wbytes + heads_bytes, w_gpu + math.ceil(heads_bytes / shards)
    free = gpu_bytes - w_gpu - RUNTIME_RESERVE
    pool = max(0, int(free * kv.free_gpu_mem_fraction))
    tokens = pool // kv_tok_gpu
    if kv.max_tokens is not None:
        tokens = min(tokens, kv.max_tokens)
    # an engine built with speculative decoding holds max_seq_len + max_draft_len tokens per
    # sequence
    seq_len = built_limits(r)["max_seq_len"] if r.runtime == "engine" else e.max_seq_len
    seqs = (tokens // kv.tokens_per_block) // math.ceil(seq_len / kv.tokens_per_block)
    return MemoryPlan(
        gpu=r.gpu,
        gpu_bytes=gpu_bytes,
        quantization=r.quantization,
        params=params,
        weight_bytes=wbytes,
        weight_bytes_per_gpu=w_gpu,
        kv_bytes_per_token=kv_tok,
        kv_bytes_per_token_per_gpu=kv_tok_gpu,
        kv_pool_bytes_per_gpu=pool,
        max_kv_tokens=tokens,
        max_sequences_at_max_seq_len=seqs,
        fits=free > 0,
        notes=_notes(r, arch, free, w_gpu, seqs, seq_len),
    )


def _weights_per_gpu(arch: Architecture, e, wbytes: int) -> int:
    """The weights one GPU holds: the split part over tp × pp, plus what every rank holds whole in
    16-bit: the norms and, unless use_parallel_embedding, the input embedding (TensorRT-LLM's
    converters default it to false; lm_head is split over tp either way)."""
    shards = e.tp_size * e.pp_size
    whole = (2 * arch.layers + 1) * arch.hidden * 2
    if not e.use_parallel_embedding:
        whole += arch.vocab * arch.hidden * 2
    return math.ceil((wbytes - whole) / shards) + whole if shards > 1 else wbytes


def _notes(
    r: LLMRecipe, arch: Architecture, free: int, w_gpu: int, seqs: int, seq_len: int
) -> list[str]:
    """What the plan warns of: weights that do not fit, fewer sequences than max_batch_size, a
    max_seq_len beyond the checkpoint's positions."""
    e = r.engine
    notes = []
    if free <= 0:
        notes.append(
            f"weights ({w_gpu / GIB:.1f} GiB per GPU) + runtime reserve "
            f"({RUNTIME_RESERVE / GIB:.1f} GiB) exceed the {r.gpu}'s {GPU_MEMORY_GIB[r.gpu]} GiB"
        )
    elif seqs < e.max_batch_size:
        notes.append(
            f"only {seqs} sequences of max_seq_len {seq_len} fit in the KV cache, fewer than "
            f"engine.max_batch_size {e.max_batch_size}: the scheduler will queue the rest"
        )
    if arch.max_position_embeddings and e.max_seq_len > arch.max_position_embeddings:
        notes.append(
            f"max_seq_len {e.max_seq_len} exceeds the checkpoint's max_position_embeddings "
            f"{arch.max_position_embeddings}"
        )
    return notes
