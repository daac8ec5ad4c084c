"""The TensorRT-LLM backend at plan time: the steps a recipe needs (engine route: trtllm.engine,
trtllm.tokenizer, trtllm.lora; LLM-API route: trtllm.checkpoint or trtllm.quantize, with its LoRA
and draft steps and the recipe's own trtllm.tokenizer), checked against the checkpoint, and the
plan's extras (route, memory plan)."""

from __future__ import annotations

import json
from pathlib import Path

from tritonbuild.backends.base import PlanContext
from tritonbuild.backends.llm.checkpoint import (
    fetch_checkpoint,
    read_checkpoint,
    read_tokenizer,
    recipe_dir,
    recipe_path,
)
from tritonbuild.backends.llm.gpus import GPU_SM
from tritonbuild.backends.llm.memory import Architecture, tp_heads_problem
from tritonbuild.backends.tensorrtllm import speculative as specdec
from tritonbuild.backends.tensorrtllm.families import CONVERTERS, family_problems
from tritonbuild.backends.tensorrtllm.lora_build import lora_build_params
from tritonbuild.backends.tensorrtllm.memory import memory_plan
from tritonbuild.backends.tensorrtllm.prequant import prequantized, quant_params
from tritonbuild.backends.tensorrtllm.quant import (
    FORMATS,
    LLMAPI_FORMATS,
    Prequantized,
    read_prequantized,
)
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
from tritonbuild.backends.tensorrtllm.speculative import draft_config, draft_step, engine_params_of
from tritonbuild.core.hashing import tree_files
from tritonbuild.core.stores import is_url
from tritonbuild.errors import PlanError, RecipeError
from tritonbuild.recipe.load import LoadedRecipe

# what the OpenAI frontend loads per LoRA
LORA_FILES = ("model.lora_weights.npy", "model.lora_config.npy")


def lora_step(loaded: LoadedRecipe, ctx: PlanContext) -> list[tuple[str, dict, dict[str, str]]]:
    """The recipe's LoRA adapters, content-hashed (their paths stay out of the cache key)."""
    r: LLMRecipe = loaded.recipe
    if r.lora is None:
        return []
    adapters, inputs = {}, {}
    for name, rel in r.lora.adapters.items():
        d = recipe_dir(loaded, rel, ("lora", "adapters", name))
        missing = [f for f in LORA_FILES if not (d / f).is_file()]
        if missing:
            raise PlanError(
                f"LoRA adapter {name!r} at {d} lacks {', '.join(missing)}",
                where=loaded.where(("lora", "adapters", name)),
                hint="convert the adapter with TensorRT-LLM's hf_lora_convert.py (it writes both "
                ".npy)",
            )
        adapters[name] = {f: ctx.digest(d / f) for f in LORA_FILES}
        inputs.update({str(d / f): adapters[name][f] for f in LORA_FILES})
    return [("trtllm.lora", {"adapters": adapters}, inputs)]


def _check_model(loaded: LoadedRecipe, arch: Architecture, config: dict) -> None:
    """What the recipe asks of this checkpoint that TensorRT-LLM cannot do: heads split over
    tp_size, and the checkpoint's own bfloat16 (dtype: auto keeps it) on a GPU without bfloat16."""
    r: LLMRecipe = loaded.recipe
    if (heads := tp_heads_problem(arch, r.engine.tp_size)) is not None:
        route = "LLM-API (runtime: pytorch)" if r.runtime == "pytorch" else "engine"
        raise RecipeError(
            f"engine.tp_size: {heads}",
            where=loaded.where(("engine", "tp_size")),
            hint=f"pick a tensor parallel size that divides the heads ({route} route), or spread "
            "the GPUs with engine.pp_size",
        )
    if r.dtype == "auto" and config.get("torch_dtype") == "bfloat16" and GPU_SM[r.gpu] < 8.0:
        raise RecipeError(
            f"dtype: auto keeps the checkpoint's bfloat16, which {r.gpu} (compute capability "
            f"{GPU_SM[r.gpu]}) lacks",
            where=loaded.where(("dtype",)),
            hint="set dtype: float16",
        )


def _add_calibration(
    loaded: LoadedRecipe, ctx: PlanContext, params: dict, inputs: dict[str, str]
) -> None:
    """The recipe's local calibration dataset, hashed into a quantizing step's params and inputs."""
    r: LLMRecipe = loaded.recipe
    if r.calibration is None:
        return
    data = recipe_path(loaded, r.calibration.dataset, ("calibration", "dataset"))
    root = data if data.is_dir() else data.parent
    calib = {
        rel.as_posix(): ctx.digest(root / rel)
        for rel in (tree_files(data) if data.is_dir() else [Path(data.name)])
    }
    params["calibration"] = {"files": calib, "size": r.calibration.size, "is_dir": data.is_dir()}
    inputs.update({str(root / k): v for k, v in calib.items()})


def _calibration_unused(loaded: LoadedRecipe, pre: Prequantized | None) -> None:
    """runtime: pytorch calibrates only in ModelOpt's quantize.py (--calib_dataset, --calib_size):
    calibration with no trtllm.quantize step planned would be dropped, so it is refused."""
    r: LLMRecipe = loaded.recipe
    if r.calibration is None:
        return
    why = (
        f"the checkpoint is already quantized ({pre.read}): it is packaged as it is"
        if pre is not None
        else "quantization: none plans no ModelOpt quantize.py run"
    )
    raise RecipeError(
        f"calibration: nothing is calibrated on runtime: pytorch (the LLM-API route): {why}, and "
        "the LLM API takes no calibration data (TorchLlmArgs has no calib_config; it is TrtLlmArgs' "
        "own)",
        where=loaded.where(("calibration",)),
        hint="remove calibration, or set a quantization ModelOpt calibrates ("
        + ", ".join(f for f in LLMAPI_FORMATS if f != "none")
        + ") on a checkpoint that is not quantized yet",
    )


def _quantize_tokenizer(loaded: LoadedRecipe, files: dict[str, str]) -> None:
    """ModelOpt's quantize.py calibrates with the tokenizer of --model_dir (quantize_and_export
    takes no tokenizer, its argparse no tokenizer flag): a checkpoint without one cannot be
    quantized, whatever tokenizer the recipe names for serving."""
    r: LLMRecipe = loaded.recipe
    if r.tokenizer is None or {"tokenizer.json", "tokenizer.model"} & set(files):
        return
    raise RecipeError(
        f"tokenizer: {r.tokenizer} is served, but quantization: {r.quantization} runs ModelOpt's "
        "quantize.py on the checkpoint, which calibrates with the checkpoint directory's own "
        "tokenizer (it takes no tokenizer flag) and the checkpoint has none",
        where=loaded.where(("tokenizer",)),
        hint="copy the tokenizer files into the checkpoint directory, or quantize elsewhere and "
        "point checkpoint.path at the quantized checkpoint",
    )


def _llmapi_steps(
    loaded: LoadedRecipe,
    ctx: PlanContext,
    ckpt: Path,
    config: dict,
    files: dict[str, str],
    tokenizer: list,
) -> list:
    """runtime: pytorch: the checkpoint as it is, or quantized by ModelOpt into a Hugging Face
    checkpoint first (int4_awq = W4A16 AWQ, fp8). A checkpoint already quantized is detected from
    its own files. tokenizer: the recipe's own tokenizer step, if it names one."""
    r: LLMRecipe = loaded.recipe
    inputs = {str(ckpt / k): v for k, v in files.items()}
    from tritonbuild.backends.tensorrtllm.llmapi.emit import peft_lora_step

    extra = [
        *tokenizer,
        *peft_lora_step(loaded, ctx, recipe_dir),
        *draft_step(loaded, ctx, recipe_dir),
    ]
    pre = prequantized(loaded, ckpt, config)
    if pre is not None or r.quantization == "none":
        _calibration_unused(loaded, pre)
        return [("trtllm.checkpoint", {"files": sorted(files)}, inputs), *extra]
    _quantize_tokenizer(loaded, files)
    params = {
        "quantization": r.quantization,
        "dtype": r.dtype,
        "kv": {"dtype": r.kv_cache.dtype},
        "files": sorted(files),
        "trtllm_version": r.image.trtllm_version,
    }
    _add_calibration(loaded, ctx, params, inputs)
    return [("trtllm.quantize", params, inputs), *extra]


def plan_steps(loaded: LoadedRecipe, ctx: PlanContext) -> list[tuple[str, dict, dict[str, str]]]:
    r: LLMRecipe = loaded.recipe
    ckpt, config, files = read_checkpoint(loaded, ctx)
    tok, tok_files = read_tokenizer(loaded, ckpt, ctx)
    arch = Architecture.from_hf_config(config)
    _check_model(loaded, arch, config)
    tokenizer = (
        "trtllm.tokenizer",
        {"files": sorted(tok_files)},
        {str(tok / k): v for k, v in tok_files.items()},
    )
    if r.runtime == "pytorch":  # LLM() reads the checkpoint's own tokenizer unless told another
        return _llmapi_steps(loaded, ctx, ckpt, config, files, [tokenizer] if r.tokenizer else [])
    return [
        _engine_step(loaded, ctx, arch, ckpt, config, files),
        tokenizer,
        *lora_step(loaded, ctx),
    ]


def _check_engine_route(
    loaded: LoadedRecipe, arch: Architecture, pre: Prequantized | None, heads: Path | None
) -> None:
    """What the engine route cannot build: weights that do not fit the GPU, settings the family's
    converter cannot express, a family with no converter."""
    r: LLMRecipe = loaded.recipe
    plan = memory_plan(
        r, arch, pre.params() if pre else None, heads_bytes=specdec.heads_bytes(heads)
    )
    if not plan.fits:
        raise PlanError(
            f"the weights alone do not fit: {plan.notes[0]}",
            where=loaded.where(("gpu",)),
            hint="use a larger GPU, more tensor parallelism (engine.tp_size) or int4 quantization",
        )
    for loc, message, hint in [
        *family_problems(r, arch.model_type),
        *filter(None, [specdec.medusa_family_problem(r, arch.model_type)]),
    ]:
        raise RecipeError(f"{'.'.join(loc)}: {message}", where=loaded.where(loc), hint=hint)
    if (
        (FORMATS[r.quantization].made_by != "modelopt" or pre)
        and arch.model_type not in CONVERTERS
        and r.engine.build_path == "cli"
    ):
        raise PlanError(
            f"no convert_checkpoint.py is known for model_type {arch.model_type!r}",
            where=loaded.where(("checkpoint", "path")),
            hint="use runtime: pytorch (the LLM API) or engine.build_path: llmapi",
        )


def _engine_step(
    loaded: LoadedRecipe,
    ctx: PlanContext,
    arch: Architecture,
    ckpt: Path,
    config: dict,
    files: dict[str, str],
) -> tuple[str, dict, dict[str, str]]:
    """trtllm.engine: keyed by every setting the engine is built with, its inputs by content."""
    r: LLMRecipe = loaded.recipe
    pre = prequantized(loaded, ckpt, config)
    # checked once; its size and its files both come from here
    heads = specdec.heads_dir(loaded, recipe_dir)
    _check_engine_route(loaded, arch, pre, heads)
    params = {
        "model_type": arch.model_type,
        "dtype": r.dtype,
        "quantization": r.quantization,
        "engine": r.engine.model_dump(exclude={"timeout_s"}),
        "kv": {
            "type": r.kv_cache.type,
            "tokens_per_block": r.kv_cache.tokens_per_block,
            "dtype": r.kv_cache.dtype,
        },
        "trtllm_version": r.image.trtllm_version,
        **quant_params(r, pre),
    }
    inputs = {str(ckpt / k): v for k, v in files.items()}
    _add_calibration(loaded, ctx, params, inputs)
    lora, lora_inputs = lora_build_params(loaded, ctx, recipe_dir)
    if lora:  # the LoRA plugin is part of the engine: its settings key the step
        params["lora"] = lora
        inputs.update(lora_inputs)
    # so is the speculative decoding mode and its draft length, and Medusa's heads, by content
    if speculative := engine_params_of(r):
        heads_files, heads_in = specdec.heads_inputs(ctx, heads)
        params["speculative"] = {**speculative, **({"heads": heads_files} if heads_files else {})}
        inputs.update(heads_in)
    return "trtllm.engine", params, inputs


def describe(loaded: LoadedRecipe, ctx: PlanContext) -> dict:
    """Plan extras: the route and why, the GPU memory plan (from the checkpoint's config.json only;
    no hashing)."""
    r: LLMRecipe = loaded.recipe
    pytorch = r.runtime == "pytorch"
    name = "LLM API (runtime: pytorch)" if pytorch else "TensorRT engine (runtime: engine)"
    route = {"route": {"name": name, "why": r.route_why}}
    ckpt = (
        fetch_checkpoint(loaded, ctx)
        if is_url(r.checkpoint.path)
        else recipe_dir(loaded, r.checkpoint.path, ("checkpoint", "path"))
    )
    try:
        config = json.loads((ckpt / "config.json").read_text())
        arch = Architecture.from_hf_config(config)
    except (OSError, ValueError, KeyError):
        return route
    try:
        pre = read_prequantized(ckpt, config)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        pre = None  # plan_steps says what is wrong with it
    draft = draft_config(loaded, recipe_dir)
    plan = memory_plan(
        r,
        arch,
        pre.params() if pre else None,
        Architecture.from_hf_config(draft) if draft else None,
        specdec.heads_bytes(specdec.heads_dir(loaded, recipe_dir)),
        specdec.eagle_head_bytes(loaded, recipe_dir),
    )
    return {**route, "architecture": arch.model_dump(), "memory_plan": plan.model_dump()}
