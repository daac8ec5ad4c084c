"""The TensorRT-LLM backend's steps as they run: packaging (checkpoint, draft, tokenizer, LoRA
adapters) anywhere; ModelOpt's quantize.py and the engine build (TensorRT-LLM's own command lines or
its LLM API) only where TensorRT-LLM and a GPU are, else the step is skipped with the reason."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

from tritonbuild.backends import StepSkipped
from tritonbuild.backends.base import StepContext
from tritonbuild.backends.common import checkpoint_root, copy_inputs, split_tree
from tritonbuild.backends.llm.checkpoint import TOKENIZER_FILES
from tritonbuild.backends.tensorrtllm import argv as cmd
from tritonbuild.backends.tensorrtllm import speculative as specdec
from tritonbuild.backends.tensorrtllm.lora_build import lora_build_argv, split_adapter
from tritonbuild.backends.tensorrtllm.speculative import build_argv as speculative_argv
from tritonbuild.core.proc import python_module_argv, run_logged
from tritonbuild.errors import BuildError

DEFAULT_TIMEOUT_S = 4 * 3600  # EngineLimits.timeout_s default
# steps that package files as they are: the model's or the draft's checkpoint, the tokenizer, LoRA
PACKAGING = ("trtllm.checkpoint", "trtllm.draft", "trtllm.tokenizer", "trtllm.lora")


def _split_calibration(params: dict, inputs: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """(checkpoint inputs, the calibration dataset path) of a trtllm.engine step."""
    calib = params.get("calibration")
    if not calib:
        return inputs, None
    rest, root = split_tree(calib["files"], inputs)
    return rest, root if calib["is_dir"] else f"{root}/{next(iter(calib['files']))}"


def _gpu_present() -> bool:
    return shutil.which("nvidia-smi") is not None


def engine_view(params: dict) -> SimpleNamespace:
    """The recipe fields argv.py reads, rebuilt from a trtllm.engine step's params (never from the
    recipe)."""
    return SimpleNamespace(
        dtype=params["dtype"],
        quantization=params["quantization"],
        engine=SimpleNamespace(**params["engine"]),
        kv_cache=SimpleNamespace(**params["kv"]),
    )


def _package(kind: str, params: dict, inputs: dict[str, str], out: Path) -> None:
    """A packaging step: its input files copied under out."""
    if kind in ("trtllm.checkpoint", "trtllm.draft"):
        copy_inputs(inputs, out / kind.split(".")[1])
    elif kind == "trtllm.tokenizer":
        tok = out / "tokenizer"
        tok.mkdir(parents=True)
        for src in inputs:
            shutil.copyfile(src, tok / Path(src).name)
    else:
        by_digest = {digest: src for src, digest in inputs.items()}
        for name, files in params["adapters"].items():
            # a PEFT adapter (LLM-API route) may hold subdirectories
            for f, digest in files.items():
                (out / "lora" / name / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(by_digest[digest], out / "lora" / name / f)


def _require_tensorrt_llm(kind: str) -> None:
    """Skips the step, saying where it runs instead, without TensorRT-LLM and a GPU here."""
    if importlib.util.find_spec("tensorrt_llm") is not None and _gpu_present():
        return
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


def run_step(ctx: StepContext) -> None:
    kind, params, inputs = ctx.kind, ctx.params, ctx.inputs
    if kind in PACKAGING:
        _package(kind, params, inputs, ctx.out)
        return
    _require_tensorrt_llm(kind)
    inputs, lora_dir = split_adapter(params, inputs)
    inputs, heads_dir = specdec.split_heads(params, inputs)
    inputs, calib_dataset = _split_calibration(params, inputs)
    ckpt = str(checkpoint_root(inputs))
    if kind == "trtllm.quantize":
        _quantize_hf(ctx, ckpt, calib_dataset)
        return
    engine_dir = ctx.out / "engine"
    ctx.log_dir.mkdir(parents=True, exist_ok=True)
    if params["engine"]["build_path"] == "llmapi":
        _build_with_llmapi(ctx, ckpt, engine_dir)
    else:
        _build_with_cli(ctx, ckpt, engine_dir, calib_dataset, lora_dir, heads_dir)
    # the engine is checked against the whole recipe at emit
    if not (engine_dir / "config.json").is_file():
        raise BuildError(
            f"the engine build wrote no {engine_dir / 'config.json'}",
            hint=f"see the logs in {ctx.log_dir}",
        )


def _build_with_llmapi(ctx: StepContext, ckpt: str, engine_dir: Path) -> None:
    """engine.build_path llmapi: LLM(build_config=...) in a subprocess, from a spec file."""
    spec = ctx.log_dir / "llmapi-spec.json"
    spec.write_text(
        json.dumps(
            cmd.llmapi_spec(engine_view(ctx.params), ckpt, str(engine_dir)),
            indent=2,
            sort_keys=True,
        )
    )
    _run(
        python_module_argv("tritonbuild.backends.tensorrtllm.llmapi.build", str(spec)),
        ctx.log_dir,
        "llmapi-build",
        ctx.timeout_s or DEFAULT_TIMEOUT_S,
    )


def _build_with_cli(
    ctx: StepContext,
    ckpt: str,
    engine_dir: Path,
    calib_dataset: str | None,
    lora_dir: str | None,
    heads_dir: str | None,
) -> None:
    """engine.build_path cli: the family's (or ModelOpt's) converter, then trtllm-build."""
    params, log_dir = ctx.params, ctx.log_dir
    recipe, timeout = engine_view(params), ctx.timeout_s or DEFAULT_TIMEOUT_S
    trt_ckpt = ctx.out.parent / "trt-checkpoint"
    convert = cmd.convert_argv(
        recipe,
        params["model_type"],
        ckpt,
        str(trt_ckpt),
        sys.executable,
        calib_dataset,
        (params.get("calibration") or {}).get("size", 32),
        params.get("checkpoint_quantization"),
        specdec.medusa_convert_flags(params.get("speculative"), heads_dir),
    )
    _run(convert, log_dir, "convert", timeout)
    _run(
        cmd.build_argv(recipe, str(trt_ckpt), str(engine_dir), str(log_dir / "timing.cache"))
        + lora_build_argv(params.get("lora"), lora_dir)
        + speculative_argv(params.get("speculative")),
        log_dir,
        "trtllm-build",
        timeout,
    )
    shutil.rmtree(trt_ckpt, ignore_errors=True)


def _quantize_hf(ctx: StepContext, ckpt: str, calib_dataset: str | None) -> None:
    """ModelOpt's quantize.py --export_format hf into out/checkpoint; the tokenizer files follow if
    it left them."""
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
