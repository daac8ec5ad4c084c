"""TensorRT-LLM's real interfaces as command lines: checkpoint conversion / ModelOpt quantization, then
trtllm-build; or the LLM API (BuildConfig + QuantConfig) in a subprocess. Pure functions: unit tests assert
the exact argv for each recipe shape."""

from __future__ import annotations

import os

from tritonbuild.recipe.llm import LLMRecipe

# model_type (HF config.json) → examples/ subdirectory holding convert_checkpoint.py
CONVERTERS = {"llama": "models/core/llama", "mistral": "models/core/llama", "qwen2": "models/core/qwen",
              "qwen": "models/core/qwen", "gpt2": "models/core/gpt", "gemma": "models/core/gemma",
              "phi": "models/core/phi", "falcon": "models/contrib/falcon"}
QUANT_ALGO = {"int4_weight_only": "W4A16", "int4_awq": "W4A16_AWQ", "fp8": "FP8", "none": None}


def examples_dir() -> str:
    # NOTE: the NGC *-trtllm-python-py3 images keep TensorRT-LLM's examples here; pip wheels do not ship them.
    return os.environ.get("TRITONBUILD_TRTLLM_EXAMPLES", "/app/tensorrt_llm/examples")


def convert_argv(r: LLMRecipe, model_type: str, checkpoint: str, out: str, python: str = "python3") -> list[str]:
    """HF checkpoint → TRT-LLM checkpoint (weight-only RTN via convert_checkpoint.py, AWQ/FP8 via ModelOpt)."""
    e = r.engine
    parallel = ["--tp_size", str(e.tp_size), "--pp_size", str(e.pp_size)]
    if r.quantization in ("int4_awq", "fp8"):
        argv = [python, f"{examples_dir()}/quantization/quantize.py", "--model_dir", checkpoint,
                "--dtype", r.dtype, "--output_dir", out]
        if r.quantization == "int4_awq":
            argv += ["--qformat", "int4_awq", "--awq_block_size", "128", "--calib_size", "32"]
        else:
            argv += ["--qformat", "fp8"]
        if r.kv_cache.dtype != "auto":
            argv += ["--kv_cache_dtype", r.kv_cache.dtype]
        return argv + parallel
    if model_type not in CONVERTERS:
        raise KeyError(model_type)
    argv = [python, f"{examples_dir()}/{CONVERTERS[model_type]}/convert_checkpoint.py", "--model_dir", checkpoint,
            "--output_dir", out, "--dtype", r.dtype]
    if r.quantization == "int4_weight_only":
        argv += ["--use_weight_only", "--weight_only_precision", "int4"]
    if r.kv_cache.dtype == "int8":
        argv.append("--int8_kv_cache")
    elif r.kv_cache.dtype == "fp8":
        argv.append("--fp8_kv_cache")
    return argv + parallel


def build_argv(r: LLMRecipe, trt_checkpoint: str, engine_dir: str, timing_cache: str) -> list[str]:
    """trtllm-build with every limit spelled out (none left to version-dependent defaults)."""
    e, kv = r.engine, r.kv_cache
    on = {True: "enable", False: "disable"}
    return ["trtllm-build", "--checkpoint_dir", trt_checkpoint, "--output_dir", engine_dir,
            "--gemm_plugin", "auto", "--gpt_attention_plugin", "auto",
            "--kv_cache_type", kv.type, "--remove_input_padding", "enable", "--context_fmha", "enable",
            "--use_paged_context_fmha", on[e.use_paged_context_fmha],
            "--tokens_per_block", str(kv.tokens_per_block),
            "--max_batch_size", str(e.max_batch_size), "--max_input_len", str(e.max_input_len),
            "--max_seq_len", str(e.max_seq_len), "--max_num_tokens", str(e.max_num_tokens),
            "--max_beam_width", str(e.max_beam_width), "--logits_dtype", e.logits_dtype,
            "--workers", str(e.tp_size * e.pp_size),
            "--input_timing_cache", timing_cache, "--output_timing_cache", timing_cache]


def llmapi_spec(r: LLMRecipe, checkpoint: str, engine_dir: str) -> dict:
    """What the LLM-API build script (llmapi_build.py) receives: BuildConfig, QuantConfig, parallelism."""
    e, kv = r.engine, r.kv_cache
    return {"model": checkpoint, "engine_dir": engine_dir, "dtype": r.dtype,
            "build_config": {"max_batch_size": e.max_batch_size, "max_input_len": e.max_input_len,
                             "max_seq_len": e.max_seq_len, "max_num_tokens": e.max_num_tokens,
                             "max_beam_width": e.max_beam_width},
            "plugin_config": {"use_paged_context_fmha": e.use_paged_context_fmha,
                              "tokens_per_block": kv.tokens_per_block},
            "quant_algo": QUANT_ALGO[r.quantization],
            "kv_cache_quant_algo": {"fp8": "FP8", "int8": "INT8"}.get(kv.dtype),
            "tensor_parallel_size": e.tp_size, "pipeline_parallel_size": e.pp_size}
