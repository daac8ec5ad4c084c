"""The architecture and memory model every LLM runtime plans with: architecture numbers from the
checkpoint's Hugging Face config.json, through the spellings of each family (GPT-2's
n_embd/n_head/n_layer, Falcon's n_head_kv/multi_query, nested text_config), with MoE experts and
DeepSeek-style MLA; the weights' bytes (linear layers priced by the runtime's quantization format),
KV bytes per token and GPU (ceil(kv_heads / tp) heads per rank, the layers of the largest pipeline
stage, and for MLA one latent (kv_lora_rank + qk_rope_head_dim) per layer that every rank keeps),
whether tensor parallelism splits the heads, and the MemoryPlan both runtimes report."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

GIB = 1 << 30
MIB = 1 << 20
NON_GATED = {
    "gpt2",
    "gptj",
    "gpt_neox",
    "opt",
    "bloom",
    "falcon",
    "phi",
    "starcoder",
    "gpt_bigcode",
    "starcoder2",
}
TIED_BY_DEFAULT = {
    "gpt2",
    "falcon",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi",
}  # their HF config classes default to tied


def _first(cfg: dict, *keys, default=None):
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


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
    experts: int = 0  # routed experts per MoE layer (0: dense)
    expert_intermediate: int = 0
    shared_intermediate: int = 0  # always-on shared expert(s), summed
    # leading layers with a dense MLP in an MoE model (DeepSeek first_k_dense_replace)
    dense_layers: int = 0
    kv_lora_rank: int = 0  # MLA: the compressed KV latent (0: ordinary attention)
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0

    @classmethod
    def from_hf_config(cls, cfg: dict) -> Architecture:
        if (
            "text_config" in cfg
            and _first(cfg, "num_hidden_layers", "n_layer", "num_layers") is None
        ):
            cfg = {
                **cfg["text_config"],
                "model_type": cfg["text_config"].get("model_type", cfg.get("model_type")),
            }
        model_type = cfg.get("model_type", "unknown")
        heads = _first(cfg, "num_attention_heads", "n_head", "num_heads")
        hidden = _first(cfg, "hidden_size", "n_embd", "d_model")
        layers = _first(cfg, "num_hidden_layers", "n_layer", "num_layers")
        if heads is None or hidden is None or layers is None:
            raise KeyError(
                "num_attention_heads/n_head, hidden_size/n_embd and num_hidden_layers/n_layer"
            )
        multi_query = cfg.get("multi_query") and not cfg.get("new_decoder_architecture")
        kv_heads = _first(
            cfg,
            "num_key_value_heads",
            "num_kv_heads",
            "n_head_kv",
            default=1 if multi_query else heads,
        )
        experts = int(
            _first(cfg, "num_local_experts", "num_experts", "n_routed_experts", default=0) or 0
        )
        shared = int(_first(cfg, "shared_expert_intermediate_size", default=0) or 0)
        if not shared and cfg.get("n_shared_experts"):
            shared = int(cfg["n_shared_experts"]) * int(
                _first(cfg, "moe_intermediate_size", default=0)
            )
        return cls(
            model_type=model_type,
            layers=layers,
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=_first(cfg, "head_dim", default=hidden // heads),
            intermediate=_first(
                cfg, "intermediate_size", "n_inner", "ffn_hidden_size", default=4 * hidden
            ),
            vocab=cfg["vocab_size"],
            tied_embeddings=bool(cfg.get("tie_word_embeddings", model_type in TIED_BY_DEFAULT)),
            max_position_embeddings=_first(cfg, "max_position_embeddings", "n_positions"),
            experts=experts,
            expert_intermediate=int(
                _first(cfg, "moe_intermediate_size", "intermediate_size", default=0) or 0
            )
            if experts
            else 0,
            shared_intermediate=shared if experts else 0,
            dense_layers=int(cfg.get("first_k_dense_replace") or 0) if experts else 0,
            kv_lora_rank=int(cfg.get("kv_lora_rank") or 0),
            q_lora_rank=int(cfg.get("q_lora_rank") or 0),
            qk_rope_head_dim=int(cfg.get("qk_rope_head_dim") or 0),
            qk_nope_head_dim=int(cfg.get("qk_nope_head_dim") or 0),
            v_head_dim=int(cfg.get("v_head_dim") or 0),
        )

    def _mlp(self, inter: int) -> list[tuple[int, int]]:
        if self.model_type in NON_GATED:
            return [(self.hidden, inter), (inter, self.hidden)]
        return [(self.hidden, inter)] * 2 + [(inter, self.hidden)]

    def _attention(self) -> list[tuple[int, int]]:
        if self.kv_lora_rank:  # MLA
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (
                [(self.hidden, self.q_lora_rank), (self.q_lora_rank, self.heads * qk)]
                if self.q_lora_rank
                else [(self.hidden, self.heads * qk)]
            )
            return [
                *q,
                (self.hidden, self.kv_lora_rank + self.qk_rope_head_dim),
                (self.kv_lora_rank, self.heads * (self.qk_nope_head_dim + self.v_head_dim)),
                (self.heads * self.v_head_dim, self.hidden),
            ]
        q_out, kv_out = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return [
            (self.hidden, q_out),
            (self.hidden, kv_out),
            (self.hidden, kv_out),
            (q_out, self.hidden),
        ]

    def linear_shapes(self) -> list[tuple[int, int]]:
        """(in, out) of every quantizable linear layer, all layers (every expert of an MoE
        layer)."""
        dense = self._attention() + self._mlp(self.intermediate)
        if not self.experts:
            return dense * self.layers
        moe = (
            self._attention()
            + self._mlp(self.expert_intermediate) * self.experts
            + [(self.hidden, self.experts)]
        )
        if self.shared_intermediate:
            moe += self._mlp(self.shared_intermediate)
        return dense * self.dense_layers + moe * (self.layers - self.dense_layers)

    def other_params(self) -> int:
        """Embeddings, lm_head and norms: kept in 16-bit by every quantization here."""
        embed = self.vocab * self.hidden
        return embed * (1 if self.tied_embeddings else 2) + (2 * self.layers + 1) * self.hidden


def _splits(arch: Architecture, tp: int) -> tuple[bool, bool]:
    """(query heads split evenly over tp, KV heads split evenly or replicate evenly over tp)."""
    kv_ok = bool(arch.kv_lora_rank) or arch.kv_heads % tp == 0 or tp % arch.kv_heads == 0
    return arch.heads % tp == 0, kv_ok


def tp_heads_problem(arch: Architecture, tp: int) -> str | None:
    """Why tensor parallelism tp cannot split this model's attention, or None. TensorRT-LLM (engine
    and LLM-API) and vLLM give each rank heads / tp query heads, and kv_heads / tp KV heads or, when
    tp is a multiple of kv_heads, tp / kv_heads copies of one (MLA keeps one latent per rank: only
    the query heads split)."""
    q_ok, kv_ok = _splits(arch, tp)
    if q_ok and kv_ok:
        return None
    works = [t for t in (1, 2, 4, 8, 16) if all(_splits(arch, t))]
    what = (
        f"{arch.heads} attention heads"
        if not q_ok
        else f"{arch.kv_heads} KV heads (of {arch.heads} heads)"
    )
    vllm = (
        (
            f" (vLLM: 'Total number of attention heads ({arch.heads}) must be divisible by tensor "
            f"parallel size ({tp}).')"
        )
        if not q_ok
        else ""
    )
    return (
        f"tensor parallel size {tp} does not divide {arch.model_type}'s {what}; each rank needs "
        f"whole heads{vllm}; sizes that divide: {', '.join(map(str, works))}"
    )


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


def sixteen_bit_bytes(linears: list[tuple[int, int]]) -> int:
    """Bytes of linear layers ((in, out) each) kept in 16-bit."""
    return 2 * sum(i * o for i, o in linears)


def model_weight_bytes(arch: Architecture, linear_bytes=sixteen_bit_bytes) -> tuple[int, int]:
    """(parameter count, bytes): the linear layers as linear_bytes(arch.linear_shapes()) prices them
    (a runtime's quantization formats; 16-bit by default), embeddings, lm_head and norms in
    16-bit."""
    linears = arch.linear_shapes()
    params = sum(i * o for i, o in linears) + arch.other_params()
    return params, arch.other_params() * 2 + linear_bytes(linears)


def kv_bytes_per_token(arch: Architecture, kv_dtype: str, tp: int = 1, pp: int = 1) -> int:
    """KV bytes one token takes on one GPU: 2 (K and V) × layers × ceil(kv_heads / tp) × head_dim ×
    bytes; for MLA 1 × layers × (kv_lora_rank + qk_rope_head_dim) × bytes on every rank. Layers: the
    largest of pp stages."""
    size = 1 if kv_dtype in ("fp8", "int8") else 2
    layers = math.ceil(arch.layers / pp)
    if arch.kv_lora_rank:
        return layers * (arch.kv_lora_rank + arch.qk_rope_head_dim) * size
    return 2 * layers * math.ceil(arch.kv_heads / tp) * arch.head_dim * size
