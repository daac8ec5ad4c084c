"""TensorRT-LLM backend: HF checkpoint → (quantized) engine → preprocessing / tensorrt_llm / postprocessing /
ensemble (/ BLS) models. The engine build runs TensorRT-LLM's own command lines (or its LLM API) where it
is installed; elsewhere the step is skipped with the reason, or a prebuilt engine is given (--engine)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

from tritonbuild.backends import StepSkipped
from tritonbuild.backends.base import PlanContext, StepContext
from tritonbuild.backends.common import checkpoint_root, copy_inputs, split_tree
from tritonbuild.backends.llm.checkpoint import (
    TOKENIZER_FILES,
    fetch_checkpoint,
    read_checkpoint,
    read_tokenizer,
    recipe_dir,
    recipe_path,
)
from tritonbuild.backends.llm.gpus import GPU_SM
from tritonbuild.backends.llm.memory import Architecture, tp_heads_problem
from tritonbuild.backends.tensorrtllm import argv as cmd
from tritonbuild.backends.tensorrtllm import speculative as specdec
from tritonbuild.backends.tensorrtllm.lora_build import (
    lora_build_argv,
    lora_build_params,
    split_adapter,
)
from tritonbuild.backends.tensorrtllm.memory import memory_plan
from tritonbuild.backends.tensorrtllm.prequant import prequantized, quant_params
from tritonbuild.backends.tensorrtllm.quant import FORMATS, read_prequantized
from tritonbuild.backends.tensorrtllm.recipe import LLMRecipe
from tritonbuild.backends.tensorrtllm.speculative import build_argv as speculative_argv
from tritonbuild.backends.tensorrtllm.speculative import draft_config, draft_step, engine_params_of
from tritonbuild.core.hashing import tree_files
from tritonbuild.core.proc import python_module_argv, run_logged
from tritonbuild.core.stores import is_url
from tritonbuild.errors import BuildError, PlanError, RecipeError
from tritonbuild.recipe.load import LoadedRecipe

NAME = "tensorrtllm"
DEFAULT_FILENAME = None
DEFAULT_TIMEOUT_S = 4 * 3600  # EngineLimits.timeout_s default
MODELS_DIR = Path(__file__).parent / "models"


def _split_calibration(params: dict, inputs: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """(checkpoint inputs, the calibration dataset path) of a trtllm.engine step."""
    calib = params.get("calibration")
    if not calib:
        return inputs, None
    rest, root = split_tree(calib["files"], inputs)
    return rest, root if calib["is_dir"] else f"{root}/{next(iter(calib['files']))}"


LORA_FILES = (
    "model.lora_weights.npy",
    "model.lora_config.npy",
)  # what the OpenAI frontend loads per LoRA


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
                hint="convert the adapter with TensorRT-LLM's hf_lora_convert.py (it writes both .npy)",
            )
        adapters[name] = {f: ctx.digest(d / f) for f in LORA_FILES}
        inputs.update({str(d / f): adapters[name][f] for f in LORA_FILES})
    return [("trtllm.lora", {"adapters": adapters}, inputs)]


def _check_model(loaded: LoadedRecipe, arch: Architecture, config: dict) -> None:
    """What the recipe asks of this checkpoint that TensorRT-LLM cannot do: heads split over tp_size, and the
    checkpoint's own bfloat16 (dtype: auto keeps it) on a GPU without bfloat16."""
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


def _llmapi_steps(
    loaded: LoadedRecipe, ctx: PlanContext, ckpt: Path, config: dict, files: dict[str, str]
) -> list:
    """runtime: pytorch: the checkpoint as it is, or quantized by ModelOpt into a Hugging Face checkpoint first
    (int4_awq = W4A16 AWQ, fp8). A checkpoint already quantized is detected from its own files."""
    r: LLMRecipe = loaded.recipe
    inputs = {str(ckpt / k): v for k, v in files.items()}
    from tritonbuild.backends.tensorrtllm.llmapi import peft_lora_step

    extra = [*peft_lora_step(loaded, ctx, recipe_dir), *draft_step(loaded, ctx, recipe_dir)]
    if prequantized(loaded, ckpt, config) is not None or r.quantization == "none":
        return [("trtllm.checkpoint", {"files": sorted(files)}, inputs), *extra]
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
    if r.runtime == "pytorch":
        return _llmapi_steps(loaded, ctx, ckpt, config, files)
    pre = prequantized(loaded, ckpt, config)
    heads = specdec.heads_dir(
        loaded, recipe_dir
    )  # checked once; its size and its files both come from here
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
        *cmd.family_problems(r, arch.model_type),
        *filter(None, [specdec.medusa_family_problem(r, arch.model_type)]),
    ]:
        raise RecipeError(f"{'.'.join(loc)}: {message}", where=loaded.where(loc), hint=hint)
    if (
        (FORMATS[r.quantization].made_by != "modelopt" or pre)
        and arch.model_type not in cmd.CONVERTERS
        and r.engine.build_path == "cli"
    ):
        raise PlanError(
            f"no convert_checkpoint.py is known for model_type {arch.model_type!r}",
            where=loaded.where(("checkpoint", "path")),
            hint="use runtime: pytorch (the LLM API) or engine.build_path: llmapi",
        )
    engine_params = {
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
    _add_calibration(loaded, ctx, engine_params, inputs)
    lora, lora_inputs = lora_build_params(loaded, ctx, recipe_dir)
    if lora:  # the LoRA plugin is part of the engine: its settings key the step
        engine_params["lora"] = lora
        inputs.update(lora_inputs)
    if speculative := engine_params_of(
        r
    ):  # so is the speculative decoding mode and its draft length
        heads_files, heads_in = specdec.heads_inputs(ctx, heads)  # and Medusa's heads, by content
        engine_params["speculative"] = {
            **speculative,
            **({"heads": heads_files} if heads_files else {}),
        }
        inputs.update(heads_in)
    return [
        ("trtllm.engine", engine_params, inputs),
        (
            "trtllm.tokenizer",
            {"files": sorted(tok_files)},
            {str(tok / k): v for k, v in tok_files.items()},
        ),
        *lora_step(loaded, ctx),
    ]


def describe(loaded: LoadedRecipe, ctx: PlanContext) -> dict:
    """Plan extras: the route and why, the GPU memory plan (from the checkpoint's config.json only; no hashing)."""
    r: LLMRecipe = loaded.recipe
    route = {
        "route": {
            "name": "LLM API (runtime: pytorch)"
            if r.runtime == "pytorch"
            else "TensorRT engine (runtime: engine)",
            "why": r.route_why,
        }
    }
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


def _gpu_present() -> bool:
    return shutil.which("nvidia-smi") is not None


def engine_view(params: dict) -> SimpleNamespace:
    """The recipe fields argv.py reads, rebuilt from a trtllm.engine step's params (never from the recipe)."""
    return SimpleNamespace(
        dtype=params["dtype"],
        quantization=params["quantization"],
        engine=SimpleNamespace(**params["engine"]),
        kv_cache=SimpleNamespace(**params["kv"]),
    )


def run_step(ctx: StepContext) -> None:
    kind, params, inputs, out, log_dir = ctx.kind, ctx.params, ctx.inputs, ctx.out, ctx.log_dir
    if kind in (
        "trtllm.checkpoint",
        "trtllm.draft",
    ):  # a checkpoint as it is: the model's, or the draft's
        copy_inputs(inputs, out / kind.split(".")[1])
        return
    if kind == "trtllm.tokenizer":
        tok = out / "tokenizer"
        tok.mkdir(parents=True)
        for src in inputs:
            shutil.copyfile(src, tok / Path(src).name)
        return
    if kind == "trtllm.lora":
        by_digest = {digest: src for src, digest in inputs.items()}
        for name, files in params["adapters"].items():
            for (
                f,
                digest,
            ) in files.items():  # a PEFT adapter (LLM-API route) may hold subdirectories
                (out / "lora" / name / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(by_digest[digest], out / "lora" / name / f)
        return
    if importlib.util.find_spec("tensorrt_llm") is None or not _gpu_present():
        if kind == "trtllm.quantize":
            raise StepSkipped(
                "TensorRT-LLM (ModelOpt's quantize.py) and a GPU are not available here; build on a "
                "GPU runner in the NGC TensorRT-LLM image, or quantize there and point "
                "checkpoint.path at the quantized checkpoint"
            )
        raise StepSkipped(
            "TensorRT-LLM and a GPU are not available here; build on a GPU runner in the NGC "
            "TensorRT-LLM image, or pass --engine DIR (a prebuilt engine) to assemble around it"
        )
    inputs, lora_dir = split_adapter(params, inputs)
    inputs, heads_dir = specdec.split_heads(params, inputs)
    inputs, calib_dataset = _split_calibration(params, inputs)
    ckpt = str(checkpoint_root(inputs))
    if kind == "trtllm.quantize":
        _quantize_hf(ctx, ckpt, calib_dataset)
        return
    engine_dir = out / "engine"
    recipe = engine_view(params)
    timeout = ctx.timeout_s or DEFAULT_TIMEOUT_S
    log_dir.mkdir(parents=True, exist_ok=True)
    if recipe.engine.build_path == "llmapi":
        spec = log_dir / "llmapi-spec.json"
        spec.write_text(
            json.dumps(cmd.llmapi_spec(recipe, ckpt, str(engine_dir)), indent=2, sort_keys=True)
        )
        _run(
            python_module_argv("tritonbuild.backends.tensorrtllm.llmapi_build", str(spec)),
            log_dir,
            "llmapi-build",
            timeout,
        )
    else:
        trt_ckpt = out.parent / "trt-checkpoint"
        _run(
            cmd.convert_argv(
                recipe,
                params["model_type"],
                ckpt,
                str(trt_ckpt),
                sys.executable,
                calib_dataset,
                (params.get("calibration") or {}).get("size", 32),
                params.get("checkpoint_quantization"),
                specdec.medusa_convert_flags(params.get("speculative"), heads_dir),
            ),
            log_dir,
            "convert",
            timeout,
        )
        _run(
            cmd.build_argv(recipe, str(trt_ckpt), str(engine_dir), str(log_dir / "timing.cache"))
            + lora_build_argv(params.get("lora"), lora_dir)
            + speculative_argv(params.get("speculative")),
            log_dir,
            "trtllm-build",
            timeout,
        )
        shutil.rmtree(trt_ckpt, ignore_errors=True)
    if not (
        engine_dir / "config.json"
    ).is_file():  # the engine is checked against the whole recipe at emit
        raise BuildError(
            f"the engine build wrote no {engine_dir / 'config.json'}",
            hint=f"see the logs in {log_dir}",
        )


def _quantize_hf(ctx: StepContext, ckpt: str, calib_dataset: str | None) -> None:
    """ModelOpt's quantize.py --export_format hf into out/checkpoint; the tokenizer files follow if it left them."""
    out = ctx.out / "checkpoint"
    ctx.log_dir.mkdir(parents=True, exist_ok=True)
    _run(
        cmd.quantize_hf_argv(ctx.params, ckpt, str(out), sys.executable, calib_dataset),
        ctx.log_dir,
        "quantize",
        ctx.timeout_s or DEFAULT_TIMEOUT_S,
    )
    for name in TOKENIZER_FILES:
        if (Path(ckpt) / name).is_file() and not (out / name).exists():
            shutil.copyfile(Path(ckpt) / name, out / name)
    if not (out / "config.json").is_file():
        raise BuildError(
            f"quantize.py wrote no {out / 'config.json'}", hint=f"see the logs in {ctx.log_dir}"
        )


def _run(argv: list[str], log_dir: Path, name: str, timeout: int) -> None:
    res = run_logged(argv, cwd=log_dir, log_path=log_dir / f"{name}.log", timeout=timeout)
    if res.returncode != 0:
        why = f"timed out after {timeout}s" if res.timed_out else f"exit {res.returncode}"
        raise BuildError(
            f"{name} failed ({why}):\n{res.tail()}",
            where=str(res.log_path),
            hint=f"reproduce with {log_dir / 'reproduce.sh'}",
        )


def check_engine_dir(engine_dir: Path, recipe: LLMRecipe, prequant: dict | None = None) -> dict:
    """config.json present and parseable; rank*.engine count = tp × pp; cross-checks against the recipe."""
    from tritonbuild.backends.tensorrtllm.checks import engine_problems

    cfg = engine_dir / "config.json"
    if not cfg.is_file():
        raise BuildError(
            f"{engine_dir} has no config.json: not a TensorRT-LLM engine directory",
            hint="point --engine at the directory trtllm-build (or LLM.save) wrote",
        )
    engine = json.loads(cfg.read_text())
    ranks = sorted(p.name for p in engine_dir.glob("rank*.engine"))
    problems = engine_problems(recipe, engine, ranks, prequant)
    if problems:
        raise BuildError(
            "the engine does not match the recipe:\n  " + "\n  ".join(problems),
            hint="rebuild the engine from this recipe, or change the recipe to the engine's values",
        )
    return engine


def derive_io(recipe, files: dict[str, Path], recipe_dir=None):
    return [], []
