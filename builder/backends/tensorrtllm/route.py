"""Which TensorRT-LLM route a recipe takes when it leaves `runtime: auto`: the LLM API on the
PyTorch backend (upstream's default `LLM` from TensorRT-LLM 1.0; its converters, trtllm-build and
C++ Triton backend are deprecated upstream) wherever the recipe asks nothing that route cannot do,
else the TensorRT engine route."""

from __future__ import annotations

import re

from tritonbuild.backends.llm.images import image_versions
from tritonbuild.backends.tensorrtllm.quant import FORMATS, LLMAPI_FORMATS

LLMAPI_SINCE = (1, 0)  # TensorRT-LLM version whose default LLM is the PyTorch backend


def version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:2])


def choose(
    runtime: str, quantization: str, kv_dtype: str, image, speculative: str | None = None
) -> tuple[str, str]:
    """(engine | pytorch, why) for a recipe's runtime field (auto, engine or pytorch) and what it
    asks."""
    if runtime != "auto":
        return runtime, f"runtime: {runtime} is set in the recipe"
    trtllm = image_versions(image)["tensorrt_llm"]
    if version_tuple(trtllm) < LLMAPI_SINCE:
        return (
            "engine",
            f"TensorRT-LLM {trtllm} in {image.triton_image} predates the LLM-API PyTorch backend "
            "(1.0)",
        )
    if speculative in ("lookahead", "medusa"):
        return "engine", (
            f"speculative mode {speculative} is generated for the engine route (trtllm-build "
            "--speculative_decoding_mode, the backend's decoding_mode)"
        )
    if quantization == "int4_weight_only":
        return "engine", (
            "INT4 weight-only RTN (W4A16) is built on the engine route only; the LLM-API route "
            "takes a checkpoint ModelOpt already quantized (runtime: pytorch, quantization: "
            "int4_awq)"
        )
    if quantization not in LLMAPI_FORMATS:
        return "engine", (
            f"{FORMATS[quantization].what} exists on the engine route only (the LLM API's PyTorch "
            "backend has no such format)"
        )
    if kv_dtype == "int8":
        return "engine", "an int8 KV cache exists on the engine route only"
    how = {"int4_awq": "; W4A16 AWQ", "fp8": "; FP8", "none": ""}.get(
        quantization, f"; {FORMATS[quantization].what}"
    )
    if how:
        how += (
            " from a checkpoint already quantized, or quantized by ModelOpt's quantize.py "
            "--export_format hf"
        )
    return "pytorch", (
        f"TensorRT-LLM {trtllm}'s default route: the LLM API on its PyTorch backend (no engine "
        f"build; upstream deprecated the converters, trtllm-build and the C++ backend){how}"
    )
