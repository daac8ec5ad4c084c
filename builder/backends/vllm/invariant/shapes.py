"""Which decoder linears of a model tritonbuild's invariant W4A16 kernel takes, read from config.json at plan.

The kernel (w4a16.py's `supported`, behind the plugin's can_implement) reads K in whole layout blocks of LAYOUT_K
inputs and takes a group size that is a multiple of GROUP_STEP and divides K. A layer it cannot take goes to the next
W4A16 kernel vLLM lists, which is batch-variant (vLLM 0.22.0's choose_mp_linear_kernel returns the first kernel whose
can_implement accepts the layer): the answers then depend on the batch, and only the server's log said so. An
invariant INT4 recipe whose model has such a layer is refused at plan instead (the invariance table's row
`int4_layer_shape`)."""

from __future__ import annotations

from tritonbuild.backends.llm.memory import Architecture
from tritonbuild.backends.vllm.invariant import w4a16
from tritonbuild.backends.vllm.invariant.table import BY_ID

LAYOUT_K = w4a16.LAYOUT_K
GROUP_STEP = 32  # the group sizes w4a16.supported takes: multiples of this


def refusal(k: int, group: int) -> str | None:
    """Why the kernel cannot take a layer of k inputs per rank with this group size (-1: one group of k):
    the kernel's own rule (w4a16.supported), said in the words of plan's message."""
    group = k if group == -1 else group
    return None if w4a16.supported(k, group) is None else f"K {k} with group size {group}"


def linear_inputs(arch: Architecture, tp: int = 1) -> dict[str, int]:
    """in_features per tensor-parallel rank of each kind of decoder linear that runs on the W4A16 linear
    kernel: the column-parallel ones read the whole hidden state (or a LoRA-rank latent), the row-parallel ones
    (o_proj, down_proj) 1/tp of their input. A routed expert's linears run in vLLM's fused MoE kernels, not here."""
    out = {"o_proj": arch.heads * (arch.v_head_dim or arch.head_dim) // tp}
    if arch.kv_lora_rank:  # MLA: the latents' projections
        out |= {"kv_a_proj_with_mqa": arch.hidden, "kv_b_proj": arch.kv_lora_rank}
        out |= {"q_a_proj": arch.hidden, "q_b_proj": arch.q_lora_rank} if arch.q_lora_rank else {}
    else:
        out["qkv_proj"] = arch.hidden
    mlp = arch.intermediate if not arch.experts or arch.dense_layers else arch.shared_intermediate
    if mlp:
        out |= {"gate_up_proj": arch.hidden, "down_proj": mlp // tp}
    return out


def int4_group(recipe, config: dict) -> int | None:
    """The W4A16 group size the served checkpoint will have: the quantize step's, or a pre-quantized
    compressed-tensors checkpoint's (-1: per channel); None when its linears are not W4A16 INT4."""
    if recipe.quantize is not None:
        return recipe.quantize.group_size
    q = config.get("quantization_config")
    if not isinstance(q, dict) or q.get("quant_method") != "compressed-tensors":
        return None
    for group in (q.get("config_groups") or {}).values():
        w = group.get("weights") or {}
        if w.get("num_bits") == 4:
            return w.get("group_size") if w.get("strategy", "group") == "group" else -1
    return None


def layer_problem(recipe, config: dict) -> tuple[tuple[str, ...], str, str] | None:
    """(the recipe key to name, the message, the fix) for an invariant INT4 recipe with a linear the invariant
    W4A16 kernel cannot take; None otherwise."""

    if recipe.serving.determinism != "invariant" or (group := int4_group(recipe, config)) is None:
        return None
    arch = Architecture.from_hf_config(config)
    tp = recipe.engine_args.tensor_parallel_size or 1
    refused = {
        name: why for name, k in linear_inputs(arch, tp).items() if (why := refusal(k, group))
    }
    if not refused:
        return None
    key = ("quantize", "group_size") if recipe.quantize is not None else ("checkpoint", "path")
    layers = "; ".join(f"{name}: {why}" for name, why in refused.items())
    row = BY_ID["int4_layer_shape"]
    message = (
        f"the invariant W4A16 kernel cannot take {layers} (it needs K a multiple of {LAYOUT_K} and a "
        f"group size that is a multiple of {GROUP_STEP} dividing K): serving.determinism: invariant "
        f"cannot hold: {row.why}"
    )
    return key, message, row.fix
