"""GPU memory plan for an LLM: weights by quantization, KV cache per token, what fits on the target GPU.

Architecture numbers come from the checkpoint's Hugging Face config.json. Figures are estimates of the
kind TensorRT-LLM's own allocator makes (weights, then free_gpu_mem_fraction of what is left for KV).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from tritonbuild.recipe.llm import GPU_MEMORY_GIB, LLMRecipe

GIB = 1 << 30
MIB = 1 << 20
RUNTIME_RESERVE = int(1.5 * GIB)  # CUDA context, activations, TRT workspace: a conservative allowance
NON_GATED = {"gpt2", "gptj", "gpt_neox", "opt", "bloom", "falcon", "phi", "starcoder"}


class Architecture(BaseModel):
    model_config = ConfigDict(frozen=True)
    model_type: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool
    max_position_embeddings: int | None

    @classmethod
    def from_hf_config(cls, cfg: dict) -> Architecture:
        heads = cfg["num_attention_heads"]
        hidden = cfg["hidden_size"]
        return cls(model_type=cfg.get("model_type", "unknown"), layers=cfg["num_hidden_layers"], hidden=hidden,
                   heads=heads, kv_heads=cfg.get("num_key_value_heads") or heads,
                   head_dim=cfg.get("head_dim") or hidden // heads,
                   intermediate=cfg.get("intermediate_size") or 4 * hidden, vocab=cfg["vocab_size"],
                   tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
                   max_position_embeddings=cfg.get("max_position_embeddings"))

    def linear_shapes(self) -> list[tuple[int, int]]:
        """(in, out) of every quantizable linear layer, all layers."""
        q_out, kv_out = self.heads * self.head_dim, self.kv_heads * self.head_dim
        per_layer = [(self.hidden, q_out), (self.hidden, kv_out), (self.hidden, kv_out), (q_out, self.hidden)]
        if self.model_type in NON_GATED:
            per_layer += [(self.hidden, self.intermediate), (self.intermediate, self.hidden)]
        else:
            per_layer += [(self.hidden, self.intermediate)] * 2 + [(self.intermediate, self.hidden)]
        return per_layer * self.layers

    def other_params(self) -> int:
        """Embeddings, lm_head and norms: kept in 16-bit by every quantization here."""
        embed = self.vocab * self.hidden
        return embed * (1 if self.tied_embeddings else 2) + (2 * self.layers + 1) * self.hidden


class MemoryPlan(BaseModel):
    model_config = ConfigDict(frozen=True)
    gpu: str
    gpu_bytes: int
    quantization: str
    params: int
    weight_bytes: int
    weight_bytes_per_gpu: int
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    kv_pool_bytes_per_gpu: int
    max_kv_tokens: int
    max_sequences_at_max_seq_len: int
    fits: bool
    notes: list[str]


def weight_bytes(arch: Architecture, quantization: str, group_size: int = 128) -> tuple[int, int]:
    """(parameter count, bytes): int4 = 0.5 B/weight + fp16 scales (per output channel for RTN, per group of
    group_size inputs for AWQ, plus AWQ's per-input pre-quant scale); fp8 = 1 B/weight + per-tensor scales."""
    linears = arch.linear_shapes()
    linear_params = sum(i * o for i, o in linears)
    params = linear_params + arch.other_params()
    other = arch.other_params() * 2
    if quantization == "none":
        return params, params * 2
    if quantization == "int4_weight_only":
        return params, other + linear_params // 2 + sum(o for _, o in linears) * 2
    if quantization == "int4_awq":
        scales = sum(math.ceil(i / group_size) * o for i, o in linears) * 2 + sum(i for i, _ in linears) * 2
        return params, other + linear_params // 2 + scales
    if quantization == "fp8":
        return params, other + linear_params + len(linears) * 2 * 4
    raise ValueError(quantization)


def kv_bytes_per_token(arch: Architecture, kv_dtype: str) -> int:
    """2 (K and V) × layers × kv_heads × head_dim × bytes per element."""
    return 2 * arch.layers * arch.kv_heads * arch.head_dim * (1 if kv_dtype in ("fp8", "int8") else 2)


def memory_plan(r: LLMRecipe, arch: Architecture) -> MemoryPlan:
    e, kv = r.engine, r.kv_cache
    shards = e.tp_size * e.pp_size
    gpu_bytes = GPU_MEMORY_GIB[r.gpu] * GIB
    params, wbytes = weight_bytes(arch, r.quantization)
    w_gpu = math.ceil(wbytes / shards)
    kv_tok = kv_bytes_per_token(arch, kv.dtype)
    kv_tok_gpu = math.ceil(kv_tok / shards)
    free = gpu_bytes - w_gpu - RUNTIME_RESERVE
    pool = max(0, int(free * kv.free_gpu_mem_fraction))
    tokens = pool // kv_tok_gpu
    if kv.max_tokens is not None:
        tokens = min(tokens, kv.max_tokens)
    blocks = tokens // kv.tokens_per_block
    seqs = blocks // math.ceil(e.max_seq_len / kv.tokens_per_block)
    notes = []
    if free <= 0:
        notes.append(f"weights ({w_gpu / GIB:.1f} GiB per GPU) + runtime reserve ({RUNTIME_RESERVE / GIB:.1f} GiB) "
                     f"exceed the {r.gpu}'s {GPU_MEMORY_GIB[r.gpu]} GiB")
    elif seqs < e.max_batch_size:
        notes.append(f"only {seqs} sequences of max_seq_len {e.max_seq_len} fit in the KV cache, fewer than "
                     f"engine.max_batch_size {e.max_batch_size}: the scheduler will queue the rest")
    if arch.max_position_embeddings and e.max_seq_len > arch.max_position_embeddings:
        notes.append(f"max_seq_len {e.max_seq_len} exceeds the checkpoint's max_position_embeddings "
                     f"{arch.max_position_embeddings}")
    return MemoryPlan(gpu=r.gpu, gpu_bytes=gpu_bytes, quantization=r.quantization, params=params,
                      weight_bytes=wbytes, weight_bytes_per_gpu=w_gpu, kv_bytes_per_token=kv_tok,
                      kv_bytes_per_token_per_gpu=kv_tok_gpu, kv_pool_bytes_per_gpu=pool, max_kv_tokens=tokens,
                      max_sequences_at_max_seq_len=seqs, fits=free > 0, notes=notes)
