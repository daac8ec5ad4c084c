"""The model families TensorRT-LLM converts on the engine route: which
examples/…/convert_checkpoint.py each HF model_type goes through, what that converter accepts (its
argparse), and what of a recipe it cannot express, as recipe errors."""

from __future__ import annotations

from dataclasses import dataclass

from tritonbuild.backends.tensorrtllm.quant import MODELOPT, SQ_ALGOS
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe


@dataclass(frozen=True)
class Family:
    """What one examples/…/convert_checkpoint.py accepts (TensorRT-LLM 1.x argparse)."""

    script: str  # examples/ subdirectory holding convert_checkpoint.py
    # KV-cache quantizations it can calibrate: --int8_kv_cache / --fp8_kv_cache
    kv_flags: frozenset[str]
    pipeline: bool  # --pp_size accepted and > 1 allowed
    gemma_cli: bool = False  # --world-size (tensor parallelism only) and a mandatory --ckpt-type
    parallel_embedding: bool = True  # --use_parallel_embedding accepted
    smoothquant: bool = True  # --smoothquant/--per_channel/--per_token accepted
    # converts AutoAWQ/GPTQ checkpoints (update_quant_config_from_hf)
    reads_quant_config: bool = False


# NOTE: --fp8_kv_cache of the llama and gemma converters sets the FP8 algorithm but calibrates
# nothing (only int8 KV and SmoothQuant are calibrated): an FP8 KV cache goes through ModelOpt's
# quantize.py (--kv_cache_dtype fp8)
_LLAMA = Family("models/core/llama", frozenset({"int8"}), True, reads_quant_config=True)
_QWEN = Family("models/core/qwen", frozenset({"int8"}), True, reads_quant_config=True)
# its GPTQ loader: qwen and qwen2 only
_QWEN_NEWER = Family("models/core/qwen", frozenset({"int8"}), True)
_PHI = Family("models/core/phi", frozenset(), False, parallel_embedding=False, smoothquant=False)
_GEMMA = Family(
    "models/core/gemma", frozenset({"int8"}), False, gemma_cli=True, parallel_embedding=False
)
# --gpt_variant inferred: gpt2, starcoder(2), santacoder
_GPT = Family("models/core/gpt", frozenset({"int8"}), True)
# model_type (HF config.json) → its converter
FAMILIES = {
    "llama": _LLAMA,
    "mistral": _LLAMA,
    "mixtral": _LLAMA,
    "qwen": _QWEN,
    "qwen2": _QWEN,
    "qwen2_moe": _QWEN_NEWER,
    "qwen3": _QWEN_NEWER,
    "qwen3_moe": _QWEN_NEWER,
    "gpt2": _GPT,
    "gpt_bigcode": _GPT,
    "starcoder2": _GPT,
    "gemma": _GEMMA,
    "gemma2": _GEMMA,
    "gemma3_text": _GEMMA,
    "phi": _PHI,
    "phi3": _PHI,
    "phimoe": _PHI,
    "falcon": Family("models/contrib/falcon", frozenset(), True, smoothquant=False),
}
CONVERTERS = {k: f.script for k, f in FAMILIES.items()}
# model types the LLM API runs and no converter converts (its PyTorch backend's model matrix)
LLMAPI_ONLY = {
    "deepseek_v3": "DeepSeek-V3/R1",
    "gemma3": "Gemma 3 (the multimodal config; gemma3_text converts)",
}


def family_problems(r: LLMRecipe, model_type: str) -> list[tuple]:
    """(key path, message, hint) for each recipe setting the family's convert_checkpoint.py cannot
    express."""
    fam = FAMILIES.get(model_type)
    if r.engine.build_path == "llmapi" or r.runtime == "pytorch":
        return []
    if model_type in LLMAPI_ONLY:
        return [
            (
                ("runtime",),
                f"{model_type} ({LLMAPI_ONLY[model_type]}) has no convert_checkpoint.py on the "
                "engine route; TensorRT-LLM's LLM API (PyTorch backend) runs it",
                "set runtime: pytorch",
            )
        ]
    if r.quantization in MODELOPT:
        return (
            [
                (
                    ("engine", "use_parallel_embedding"),
                    f"{model_type}: ModelOpt's quantize.py (quantization: "
                    f"{r.quantization}) has no --use_parallel_embedding",
                    "remove engine.use_parallel_embedding",
                )
            ]
            if r.engine.use_parallel_embedding
            else []
        )
    return [] if fam is None else _converter_problems(r, model_type, fam)


def _converter_problems(r: LLMRecipe, model_type: str, fam: Family) -> list[tuple]:
    """What the family's convert_checkpoint.py lacks: the KV cache calibration, the quantization,
    parallel embedding, pipeline parallelism the recipe asks for."""
    out = []
    kv = r.kv_cache.dtype
    if kv != "auto" and kv not in fam.kv_flags:
        has = ", ".join(sorted(fam.kv_flags)) or "none"
        out.append(
            (
                ("kv_cache", "dtype"),
                f"{model_type}'s convert_checkpoint.py ({fam.script}) cannot calibrate a "
                f"{kv} KV cache (it calibrates: {has})",
                "use kv_cache.dtype: auto, or quantization: int4_awq / fp8 (ModelOpt's "
                "quantize.py calibrates the KV cache for every family)",
            )
        )
    out += _quant_problems(r, model_type, fam)
    if r.engine.use_parallel_embedding and not fam.parallel_embedding:
        out.append(
            (
                ("engine", "use_parallel_embedding"),
                f"{model_type}'s convert_checkpoint.py ({fam.script}) "
                "has no --use_parallel_embedding",
                "remove engine.use_parallel_embedding",
            )
        )
    if r.engine.pp_size > 1 and not fam.pipeline:
        out.append(
            (
                ("engine", "pp_size"),
                f"{model_type}'s convert_checkpoint.py ({fam.script}) supports no "
                f"pipeline parallelism (pp_size {r.engine.pp_size})",
                "use engine.tp_size for the GPUs and engine.pp_size: 1",
            )
        )
    return out


def _quant_problems(r: LLMRecipe, model_type: str, fam: Family) -> list[tuple]:
    """What of the recipe's quantization this family's converter cannot make."""
    out = []
    if r.quantization in SQ_ALGOS and not fam.smoothquant:
        has = ", ".join(sorted(k for k, f in FAMILIES.items() if f.smoothquant))
        out.append(
            (
                ("quantization",),
                f"{model_type}'s convert_checkpoint.py ({fam.script}) has no --smoothquant",
                "use int8_weight_only, or int4_awq / fp8 (ModelOpt, every family); SmoothQuant: "
                f"{has}",
            )
        )
    if r.quantization == "int4_gptq" and not fam.reads_quant_config:
        has = ", ".join(sorted(k for k, f in FAMILIES.items() if f.reads_quant_config))
        out.append(
            (
                ("quantization",),
                f"{model_type}'s convert_checkpoint.py ({fam.script}) does not read a GPTQ "
                "checkpoint's quantization_config",
                f"converters that do: {has}; or use an unquantized checkpoint with int4_awq",
            )
        )
    return out
