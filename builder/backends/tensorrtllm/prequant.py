"""A checkpoint quantized before it reached us (AutoAWQ, GPTQ, ModelOpt), planned as what it is: the
recipe must name its format, and its route must be one that reads it (the engine route's llama and
qwen converters read config.json's quantization_config; the LLM API reads ModelOpt's
hf_quant_config.json). Facts: tests/contracts/facts/trtllm_quantization.json."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.backends.llm.gpus import GPU_SM
from tritonbuild.backends.tensorrtllm.families import FAMILIES
from tritonbuild.backends.tensorrtllm.quant import FORMATS, Prequantized, arch_of, read_prequantized
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
from tritonbuild.errors import PlanError, RecipeError
from tritonbuild.recipe.load import LoadedRecipe

FP8_BLOCK_ARCHS = ("Hopper", "Blackwell")  # the LLM API's FP8(block scaling) column (facts)


def prequantized(loaded: LoadedRecipe, ckpt: Path, config: dict) -> Prequantized | None:
    """The checkpoint's own quantization (None: not quantized), checked against the recipe and its
    route."""
    r: LLMRecipe = loaded.recipe
    try:
        pre = read_prequantized(ckpt, config)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
        raise PlanError(
            f"{ckpt}: its quantization description (hf_quant_config.json or config.json "
            f"quantization_config) cannot be read ({type(e).__name__}: {e})",
            where=loaded.where(("checkpoint", "path")),
            hint="check the checkpoint's files",
        ) from None
    where = loaded.where(("quantization",))
    if pre is None:
        if FORMATS[r.quantization].made_by == "checkpoint":
            raise RecipeError(
                f"quantization: {r.quantization} takes a checkpoint already quantized with GPTQ "
                f"(config.json quantization_config quant_method gptq); {ckpt} is not quantized",
                where=where,
                hint="quantize it with GPTQModel or AutoGPTQ first, or use int4_awq "
                "(ModelOpt) or int4_weight_only",
            )
        return None
    if pre.format != r.quantization:
        raise RecipeError(
            f"quantization: {ckpt} is already quantized ({pre.read}), the recipe says "
            f"{r.quantization}",
            where=where,
            hint=f"set quantization: {pre.format}"
            if pre.format
            else "use a checkpoint of a "
            "quantization tritonbuild offers (ModelOpt W4A16_AWQ, W4A8_AWQ, FP8 or NVFP4; AutoAWQ "
            "or GPTQ 4-bit), or an unquantized one",
        )
    if (problem := _route_problem(r, pre, config.get("model_type", ""))) is not None:
        raise RecipeError(problem[0], where=loaded.where(("runtime",)), hint=problem[1])
    if pre.source == "fp8_block" and arch_of(GPU_SM[r.gpu]) not in FP8_BLOCK_ARCHS:
        raise RecipeError(
            f"gpu: {r.gpu} ({arch_of(GPU_SM[r.gpu])}) has no FP8 block-scaling kernels in the LLM "
            f"API ({pre.read}); {', '.join(FP8_BLOCK_ARCHS)} do",
            where=loaded.where(("gpu",)),
            hint="pick an H100, H200 or B200",
        )
    return pre


def _route_problem(r: LLMRecipe, pre: Prequantized, model_type: str) -> tuple[str, str] | None:
    if pre.source == "fp8":
        return (
            f"runtime: neither route reads {pre.read}: the LLM API takes quant_method fp8 only "
            "with weight_block_size (FP8 block scales), the converters read fbgemm_fp8, AutoAWQ "
            "and GPTQ",
            "use ModelOpt's FP8 export (hf_quant_config.json) with runtime: pytorch, or the "
            "unquantized checkpoint with quantization: fp8",
        )
    if pre.source == "fp8_block" and r.runtime != "pytorch":
        return (
            f"runtime: {r.runtime}: the converters do not read {pre.read}; the LLM API does",
            "set runtime: pytorch",
        )
    if r.runtime == "pytorch" and pre.source in ("awq", "gptq"):
        return (
            f"runtime: the LLM API (PyTorch backend) does not read {pre.read}: its checkpoint "
            "loader takes ModelOpt's hf_quant_config.json, and of quantization_config only fp8 "
            "block scales and mxfp4 (newer releases add nvfp4, mxfp8 and compressed-tensors; none "
            "reads awq or gptq)",
            "set runtime: engine (the llama and qwen converters read AutoAWQ and GPTQ "
            "checkpoints; the engine records W4A16_GPTQ)",
        )
    if r.runtime != "engine" or r.engine.build_path != "cli":
        return None
    if pre.source == "modelopt":
        return (
            "runtime: engine: the converters and quantize.py take an unquantized checkpoint; this "
            f"one is ModelOpt's export ({pre.read}), which the LLM API loads as it is",
            "set runtime: pytorch",
        )
    fam = FAMILIES.get(model_type)
    if pre.source in ("awq", "gptq") and (fam is None or not fam.reads_quant_config):
        has = ", ".join(sorted(k for k, f in FAMILIES.items() if f.reads_quant_config))
        return (
            f"runtime: engine: {model_type}'s converter does not read {pre.read}",
            f"converters that do: {has}",
        )
    if pre.desc_act:
        return (
            "runtime: engine: the converters refuse GPTQ with desc_act=True ('GPTQ with "
            "desc_act=True is not implemented!')",
            "use a GPTQ checkpoint made with desc_act: false",
        )
    return None


def quant_params(r: LLMRecipe, pre: Prequantized | None) -> dict:
    """What of the quantization goes into the engine step beyond its name (absent keys: as
    before)."""
    return {"checkpoint_quantization": pre.params()} if pre is not None else {}
