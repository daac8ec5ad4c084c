"""Quantization formats of a TensorRT-LLM recipe: which route makes each (a family converter's
flags, ModelOpt's quantize.py, or a checkpoint quantized before it reached us), on which GPU
architectures, the quant_algo an engine built with it records, and what its weights cost. The rules
are upstream's, recorded with repository, commit and path in
tests/contracts/facts/trtllm_quantization.json (a test keeps this table equal to them)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

AMPERE_UP = frozenset({"Ampere", "Ada", "Hopper", "Blackwell"})
FP8_UP = frozenset({"Ada", "Hopper", "Blackwell"})


@dataclass(frozen=True)
class Format:
    # GPU architectures the engine route builds it for (support-matrix.md)
    engine_archs: frozenset[str]
    # ... the LLM-API (PyTorch) route runs it on (features/quantization.md); none: the route lacks
    # it
    llmapi_archs: frozenset[str]
    # converter (convert_checkpoint.py flags) | modelopt (quantize.py) | checkpoint (already
    # quantized)
    made_by: str
    what: str  # for messages


FORMATS = {
    "none": Format(AMPERE_UP, AMPERE_UP, "converter", "16-bit"),
    "int4_weight_only": Format(AMPERE_UP, frozenset(), "converter", "INT4 weight-only RTN (W4A16)"),
    "int8_weight_only": Format(AMPERE_UP, frozenset(), "converter", "INT8 weight-only (W8A16)"),
    # SmoothQuant as convert_checkpoint.py's flags name it: --smoothquant [--per_channel]
    # [--per_token]
    "int8_sq": Format(
        AMPERE_UP, frozenset(), "converter", "INT8 SmoothQuant (W8A8), per-tensor scales"
    ),
    "int8_sq_per_channel": Format(
        AMPERE_UP, frozenset(), "converter", "INT8 SmoothQuant, per-channel weights"
    ),
    "int8_sq_per_token": Format(
        AMPERE_UP, frozenset(), "converter", "INT8 SmoothQuant, per-token activations"
    ),
    "int8_sq_per_channel_per_token": Format(
        AMPERE_UP,
        frozenset(),
        "converter",
        "INT8 SmoothQuant, per-channel weights and per-token activations",
    ),
    "int4_awq": Format(
        AMPERE_UP, frozenset({"Ampere", "Ada", "Hopper"}), "modelopt", "INT4 AWQ (W4A16)"
    ),
    # NOTE: the LLM API's docs list W4A16 GPTQ, but its checkpoint loader reads no quant_method gptq
    # (facts)
    "int4_gptq": Format(AMPERE_UP, frozenset(), "checkpoint", "INT4 GPTQ (W4A16)"),
    "w4a8_awq": Format(
        FP8_UP, frozenset({"Ada", "Hopper"}), "modelopt", "INT4 AWQ weights, FP8 activations (W4A8)"
    ),
    "fp8": Format(FP8_UP, FP8_UP, "modelopt", "FP8"),
    "nvfp4": Format(frozenset({"Blackwell"}), frozenset({"Blackwell"}), "modelopt", "NVFP4"),
}
NAMES = tuple(FORMATS)
# examples/quantization/quantize.py
MODELOPT = tuple(k for k, f in FORMATS.items() if f.made_by == "modelopt")
LLMAPI_FORMATS = tuple(k for k, f in FORMATS.items() if f.llmapi_archs)
ARCHS = {
    "Turing": (7.5,),
    "Ampere": (8.0, 8.6),
    "Ada": (8.9,),
    "Hopper": (9.0,),
    "Blackwell": (10.0, 10.3, 12.0),
}

# what an engine's config.json says (pretrained_config.quantization.quant_algo) for each recipe
# value
SQ_ALGOS = {
    "int8_sq_per_channel_per_token": "W8A8_SQ_PER_CHANNEL_PER_TOKEN_PLUGIN",
    "int8_sq_per_channel": "W8A8_SQ_PER_CHANNEL_PER_TENSOR_PLUGIN",
    "int8_sq_per_token": "W8A8_SQ_PER_TENSOR_PER_TOKEN_PLUGIN",
    "int8_sq": "W8A8_SQ_PER_TENSOR_PLUGIN",
}
SMOOTHQUANT_ALPHA = 0.5  # --smoothquant α: upstream's help text's "good first try"
ENGINE_ALGOS = {
    "int4_weight_only": {"W4A16"},
    "int8_weight_only": {"W8A16"},
    **{k: {v} for k, v in SQ_ALGOS.items()},
    "int4_awq": {"W4A16_AWQ"},
    "int4_gptq": {"W4A16_GPTQ"},
    "w4a8_awq": {"W4A8_AWQ"},
    "fp8": {"FP8"},
    "nvfp4": {"NVFP4"},
    "none": {None, "", "None"},
}


def arch_of(sm: float) -> str:
    return next((a for a, sms in ARCHS.items() if sm in sms), f"SM {sm}")


def sm_names(archs) -> str:
    return ", ".join(
        f"{a} (SM {'/'.join(str(int(s * 10)) for s in ARCHS[a])})" for a in ARCHS if a in archs
    )


def arch_problem(quantization: str, runtime: str, gpu: str, sm: float) -> tuple[str, str] | None:
    """(message, hint) when the recipe's GPU cannot run its quantization on its route, else None."""
    fmt = FORMATS[quantization]
    archs = fmt.engine_archs if runtime == "engine" else fmt.llmapi_archs
    if quantization == "fp8" or not archs or arch_of(sm) in archs or arch_of(sm) not in AMPERE_UP:
        # fp8 keeps its own rule (checks/recipe.py); a format the route lacks is a route problem; the
        # matrices say nothing of architectures before Ampere
        return None
    route = "engine route" if runtime == "engine" else "LLM-API (PyTorch) route"
    other = fmt.llmapi_archs if runtime == "engine" else fmt.engine_archs
    there = (
        f"; the {'LLM-API' if runtime == 'engine' else 'engine'} route runs it on {sm_names(other)}"
        if arch_of(sm) in other
        else ""
    )
    return (
        f"{quantization} ({fmt.what}) needs {sm_names(archs)} on the {route}; {gpu} is "
        f"{arch_of(sm)} (SM {int(sm * 10)}){there}",
        f"pick a gpu of {', '.join(a for a in ARCHS if a in archs)}, or another quantization",
    )


@dataclass(frozen=True)
class Prequantized:
    """What a checkpoint quantized before it reached us says about itself."""

    # the recipe value naming it; None: a quantization tritonbuild offers no value for
    format: str | None
    read: str  # what was read, quoted in messages
    # modelopt (hf_quant_config.json) | awq | gptq | fp8 (config.json quantization_config)
    source: str
    group_size: int = 128
    zero_point: bool = False
    desc_act: bool = False

    def params(self) -> dict:
        return {"source": self.source, "group_size": self.group_size, "zero_point": self.zero_point}


MODELOPT_ALGOS = {"W4A16_AWQ": "int4_awq", "W4A8_AWQ": "w4a8_awq", "FP8": "fp8", "NVFP4": "nvfp4"}


def read_prequantized(ckpt: Path, config: dict) -> Prequantized | None:
    """ModelOpt's hf_quant_config.json, else config.json's quantization_config (AutoAWQ, GPTQ, FP8);
    None when the checkpoint is not quantized."""
    hq = ckpt / "hf_quant_config.json"
    if hq.is_file():
        q = json.loads(hq.read_text()).get("quantization") or {}
        algo = q.get("quant_algo")
        return Prequantized(
            MODELOPT_ALGOS.get(algo),
            f"hf_quant_config.json quant_algo {algo}",
            "modelopt",
            int(q.get("group_size") or 128),
        )
    qc = config.get("quantization_config")
    if not isinstance(qc, dict) or not qc:
        return None
    method, bits = qc.get("quant_method"), qc.get("bits")
    read = f"config.json quantization_config quant_method {method}" + (
        f", {bits} bits" if bits else ""
    )
    group = int(qc.get("group_size") or 128)
    if method == "awq":
        return Prequantized(
            "int4_awq" if bits in (4, None) else None,
            read,
            "awq",
            group,
            bool(qc.get("zero_point")),
        )
    if method == "gptq":
        return Prequantized(
            "int4_gptq" if bits in (4, None) else None,
            read,
            "gptq",
            group,
            desc_act=bool(qc.get("desc_act")),
        )
    if method == "fp8" and qc.get("weight_block_size"):  # DeepSeek-style FP8 block scales
        return Prequantized(
            "fp8",
            read + f", weight_block_size {qc['weight_block_size']}",
            "fp8_block",
            int(qc["weight_block_size"][0]),
        )
    return Prequantized("fp8" if method == "fp8" else None, read, method or "unknown", group)


def engine_algos(quantization: str, prequant: dict | None) -> set:
    """quant_algo values an engine built from this recipe (and checkpoint) may record: the
    converters turn an AutoAWQ checkpoint into W4A16_GPTQ (update_quant_config_from_hf)."""
    if prequant and prequant.get("source") in ("awq", "gptq"):
        return {"W4A16_GPTQ"}
    return ENGINE_ALGOS[quantization]


def linear_bytes(
    linears: list[tuple[int, int]],
    quantization: str,
    group_size: int = 128,
    zero_point: bool = False,
) -> int:
    """Bytes of the quantizable linear layers ((in, out) each) in one format, scales included:
    weight-only RTN and SmoothQuant one scale per output channel; AWQ/GPTQ one fp16 scale (and zero)
    per group of group_size inputs (AWQ also a per-input pre-quant scale); FP8 per-tensor scales;
    NVFP4 one FP8 scale per 16 weights."""
    count = sum(i * o for i, o in linears)
    outs = sum(o for _, o in linears)
    groups = sum(math.ceil(i / group_size) * o for i, o in linears)
    ins = sum(i for i, _ in linears)
    per_tensor = len(linears) * 2 * 4
    table = {
        "none": lambda: count * 2,
        "int4_weight_only": lambda: count // 2 + outs * 2,
        "int8_weight_only": lambda: count + outs * 2,
        **dict.fromkeys(SQ_ALGOS, lambda: count + outs * 4 + per_tensor),
        "int4_awq": lambda: (
            count // 2 + groups * 2 * (2 if zero_point else 1) + (0 if zero_point else ins * 2)
        ),
        "int4_gptq": lambda: count // 2 + groups * 2 * 2,
        "w4a8_awq": lambda: count // 2 + groups * 2 + ins * 2 + per_tensor,
        "fp8": lambda: count + per_tensor,
        "nvfp4": lambda: count // 2 + count // 16 + per_tensor,
    }
    if quantization not in table:
        raise ValueError(quantization)
    return table[quantization]()
