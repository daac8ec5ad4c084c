"""TensorRT-LLM's real interfaces as command lines: checkpoint conversion / ModelOpt quantization,
then trtllm-build; or the LLM API (BuildConfig + QuantConfig) in a subprocess. Pure functions of the
recipe's engine fields; tests/contracts checks every argv against the flag sets of TensorRT-LLM's
own scripts."""

from __future__ import annotations

import os

from tritonbuild.backends.tensorrtllm.families import FAMILIES, Family
from tritonbuild.backends.tensorrtllm.quant import MODELOPT, SMOOTHQUANT_ALPHA, SQ_ALGOS
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe

# quantization → the LLM API's QuantConfig.quant_algo (engine.build_path: llmapi)
QUANT_ALGO = {
    "int4_weight_only": "W4A16",
    "int8_weight_only": "W8A16",
    "int4_awq": "W4A16_AWQ",
    "int4_gptq": "W4A16_GPTQ",
    "w4a8_awq": "W4A8_AWQ",
    "fp8": "FP8",
    "nvfp4": "NVFP4",
    "none": None,
}


EXAMPLES_DIRS = ("/app/tensorrt_llm/examples", "/app/examples")


def examples_dir() -> str:
    """TRITONBUILD_TRTLLM_EXAMPLES, else the first of the known places that exists: the TensorRT-LLM
    release container keeps the examples in /app/tensorrt_llm/examples, images built with
    tensorrtllm_backend's Dockerfile in /app/examples (WORKDIR /app)."""
    if os.environ.get("TRITONBUILD_TRTLLM_EXAMPLES"):
        return os.environ["TRITONBUILD_TRTLLM_EXAMPLES"]
    return next((d for d in EXAMPLES_DIRS if os.path.isdir(d)), EXAMPLES_DIRS[0])


def _weight_flags(r: LLMRecipe, prequant: dict | None) -> list[str]:
    """The converter's quantization flags (none for a checkpoint already quantized: it reads
    config.json)."""
    if prequant:
        return []
    if r.quantization in ("int4_weight_only", "int8_weight_only"):
        return ["--use_weight_only", "--weight_only_precision", r.quantization.split("_")[0]]
    if r.quantization in SQ_ALGOS:
        return [
            "--smoothquant",
            str(SMOOTHQUANT_ALPHA),
            *(["--per_channel"] if "per_channel" in r.quantization else []),
            *(["--per_token"] if "per_token" in r.quantization else []),
        ]
    return []


def _modelopt_argv(
    r: LLMRecipe, checkpoint: str, out: str, python: str, calib: list[str], calib_size: int
) -> list[str]:
    """ModelOpt's quantize.py into a TensorRT-LLM checkpoint (without the parallel flags)."""
    argv = [
        python,
        f"{examples_dir()}/quantization/quantize.py",
        "--model_dir",
        checkpoint,
        "--dtype",
        r.dtype,
        "--output_dir",
        out,
        "--qformat",
        r.quantization,
    ]
    if r.quantization in ("int4_awq", "w4a8_awq"):
        argv += ["--awq_block_size", "128"]
    argv += ["--calib_size", str(calib_size), *calib]
    if r.kv_cache.dtype != "auto":
        argv += ["--kv_cache_dtype", r.kv_cache.dtype]
    return argv


def _converter_command(
    r: LLMRecipe, fam: Family, checkpoint: str, out: str, python: str, medusa: list[str] | None
) -> list[str]:
    """The family's convert_checkpoint.py (the Medusa converter with medusa) with its paths and
    dtype; gemma's spells them its own way and takes --world-size."""
    e = r.engine
    script = f"{examples_dir()}/{fam.script}/convert_checkpoint.py"
    if medusa:
        script = f"{examples_dir()}/medusa/convert_checkpoint.py"
    if fam.gemma_cli and not medusa:
        return [
            python,
            script,
            "--ckpt-type",
            "hf",
            "--model-dir",
            checkpoint,
            "--output-model-dir",
            out,
            "--dtype",
            r.dtype,
            "--world-size",
            str(e.tp_size * e.pp_size),
        ]
    return [
        python,
        script,
        "--model_dir",
        checkpoint,
        "--output_dir",
        out,
        "--dtype",
        r.dtype,
        *(medusa or []),
    ]


def convert_argv(
    r: LLMRecipe,
    model_type: str,
    checkpoint: str,
    out: str,
    python: str = "python3",
    calib_dataset: str | None = None,
    calib_size: int = 32,
    prequant: dict | None = None,
    medusa: list[str] | None = None,
) -> list[str]:
    """HF checkpoint → TRT-LLM checkpoint (weight-only RTN and SmoothQuant via
    convert_checkpoint.py, AWQ/FP8/NVFP4 via ModelOpt; a checkpoint already quantized (prequant)
    through its converter, which reads its config.json). calib_dataset: a local dataset for every
    calibrating step (offline runners). medusa: the Medusa converter's flags
    (speculative.medusa_convert_flags): examples/medusa/convert_checkpoint.py replaces the
    family's."""
    e = r.engine
    calib = ["--calib_dataset", calib_dataset] if calib_dataset else []
    parallel = ["--tp_size", str(e.tp_size), "--pp_size", str(e.pp_size)]
    if r.quantization in MODELOPT and not prequant:
        return _modelopt_argv(r, checkpoint, out, python, calib, calib_size) + parallel
    fam = FAMILIES[model_type]
    argv = _converter_command(r, fam, checkpoint, out, python, medusa)
    if fam.gemma_cli and not medusa:  # --world-size instead of the parallel flags
        parallel = []
    argv += _weight_flags(r, prequant)
    if e.use_parallel_embedding:
        argv.append("--use_parallel_embedding")
    # int8 only (family_problems): the converter calibrates its scales
    if r.kv_cache.dtype != "auto":
        argv.append(f"--{r.kv_cache.dtype}_kv_cache")
    if r.kv_cache.dtype != "auto" or r.quantization in SQ_ALGOS:
        argv += calib
    return argv + parallel


def build_argv(r: LLMRecipe, trt_checkpoint: str, engine_dir: str, timing_cache: str) -> list[str]:
    """trtllm-build with every limit spelled out (none left to version-dependent defaults)."""
    e, kv = r.engine, r.kv_cache
    on = {True: "enable", False: "disable"}
    return [
        "trtllm-build",
        "--checkpoint_dir",
        trt_checkpoint,
        "--output_dir",
        engine_dir,
        "--gemm_plugin",
        "auto",
        "--gpt_attention_plugin",
        "auto",
        "--kv_cache_type",
        kv.type,
        "--remove_input_padding",
        "enable",
        "--context_fmha",
        "enable",
        "--use_paged_context_fmha",
        on[e.use_paged_context_fmha],
        "--tokens_per_block",
        str(kv.tokens_per_block),
        "--max_batch_size",
        str(e.max_batch_size),
        "--max_input_len",
        str(e.max_input_len),
        "--max_seq_len",
        str(e.max_seq_len),
        "--max_num_tokens",
        str(e.max_num_tokens),
        "--max_beam_width",
        str(e.max_beam_width),
        "--logits_dtype",
        e.logits_dtype,
        "--workers",
        str(e.tp_size * e.pp_size),
        "--input_timing_cache",
        timing_cache,
        "--output_timing_cache",
        timing_cache,
    ]


def llmapi_spec(r: LLMRecipe, checkpoint: str, engine_dir: str) -> dict:
    """What the LLM-API build script (llmapi/build.py) receives: BuildConfig, QuantConfig,
    parallelism."""
    e, kv = r.engine, r.kv_cache
    return {
        "model": checkpoint,
        "engine_dir": engine_dir,
        "dtype": r.dtype,
        "build_config": {
            "max_batch_size": e.max_batch_size,
            "max_input_len": e.max_input_len,
            "max_seq_len": e.max_seq_len,
            "max_num_tokens": e.max_num_tokens,
            "max_beam_width": e.max_beam_width,
        },
        "plugin_config": {
            "use_paged_context_fmha": e.use_paged_context_fmha,
            "tokens_per_block": kv.tokens_per_block,
        },
        "quant_algo": SQ_ALGOS.get(r.quantization) or QUANT_ALGO[r.quantization],
        "kv_cache_quant_algo": {"fp8": "FP8", "int8": "INT8"}.get(kv.dtype),
        "tensor_parallel_size": e.tp_size,
        "pipeline_parallel_size": e.pp_size,
    }


def quantize_hf_argv(
    params: dict,
    checkpoint: str,
    out: str,
    python: str = "python3",
    calib_dataset: str | None = None,
) -> list[str]:
    """ModelOpt's quantize.py exporting a Hugging Face checkpoint the LLM API loads (runtime:
    pytorch); params are a trtllm.quantize step's. Parallelism is the LLM API's business, not the
    export's."""
    argv = [
        python,
        f"{examples_dir()}/quantization/quantize.py",
        "--model_dir",
        checkpoint,
        "--dtype",
        params["dtype"],
        "--output_dir",
        out,
        "--qformat",
        params["quantization"],
    ]
    if params["quantization"] in ("int4_awq", "w4a8_awq"):
        argv += ["--awq_block_size", "128"]
    argv += ["--calib_size", str((params.get("calibration") or {}).get("size", 32))]
    argv += ["--calib_dataset", calib_dataset] if calib_dataset else []
    if params["kv"]["dtype"] != "auto":
        argv += ["--kv_cache_dtype", params["kv"]["dtype"]]
    return [*argv, "--export_format", "hf"]
