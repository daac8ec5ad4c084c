"""vLLM's quantization methods (its QuantizationMethods literal) per vLLM version a serving image ships, the values
engine_args.quantization may take; kept equal to tests/contracts/facts/vllm_engine_args.json by a test. An image
whose vLLM is not recorded here takes the methods every recorded version has."""

from __future__ import annotations

from tritonbuild.backends.tensorrtllm.images import VLLM_IMAGES

IN_EVERY_RECORDED = frozenset({
    "awq", "awq_marlin", "bitsandbytes", "compressed-tensors", "experts_int8", "fbgemm_fp8", "fp8", "fp_quant",
    "gptq", "gptq_marlin", "inc", "modelopt", "modelopt_fp4", "moe_wna16", "mxfp4", "quark", "torchao"
})
# vLLM version: the methods beyond IN_EVERY_RECORDED
BY_VERSION = {
    "0.11.1": IN_EVERY_RECORDED | {
        "auto-round", "bitblas", "deepspeedfp", "gguf", "gptq_bitblas", "gptq_marlin_24", "hqq", "ipex",
        "petit_nvfp4", "ptpc_fp8", "rtn", "tpu_int8"
    },
    "0.22.0": IN_EVERY_RECORDED | {
        "auto_gptq", "cpu_awq", "deepseek_v4_fp8", "fp8_per_block", "fp8_per_tensor", "gguf", "gpt_oss_mxfp4",
        "humming", "int8_per_channel_weight_only", "modelopt_mixed", "modelopt_mxfp8", "mxfp8", "online"
    },
    "0.24.0": IN_EVERY_RECORDED | {
        "auto_awq", "auto_gptq", "deepseek_v4_fp8", "fp8_per_block", "fp8_per_channel", "fp8_per_tensor",
        "gpt_oss_mxfp4", "humming", "int8_per_channel_weight_only", "modelopt_mixed", "modelopt_mxfp8",
        "mxfp8", "online"
    },
    "0.27.1": IN_EVERY_RECORDED | {
        "auto_awq", "auto_gptq", "deepseek_v4_fp8", "fp8_per_block", "fp8_per_channel", "fp8_per_tensor",
        "gpt_oss_mxfp4", "humming", "int8_per_channel_weight_only", "modelopt_mixed", "modelopt_mxfp8",
        "mxfp8", "nvfp4_per_token", "online"
    },
}
ALL = tuple(sorted(set().union(*BY_VERSION.values())))


def image_vllm(triton_image: str) -> str | None:
    """The vLLM an NGC tritonserver:<tag>-vllm-python-py3 image ships (images.py), else None."""
    prefix, suffix = "nvcr.io/nvidia/tritonserver:", "-vllm-python-py3"
    if triton_image.startswith(prefix) and triton_image.endswith(suffix):
        return VLLM_IMAGES.get(triton_image[len(prefix):-len(suffix)])
    return None


def quantization_problem(quantization: str | None, triton_image: str) -> tuple[str, str] | None:
    """(message, hint) when the image's vLLM has no such quantization method, else None."""
    if quantization is None:
        return None
    version = image_vllm(triton_image)
    known = BY_VERSION.get(version)
    if known is not None:
        if quantization in known:
            return None
        return (f"{triton_image} ships vLLM {version}, whose QuantizationMethods has no {quantization!r}",
                f"one of: {', '.join(sorted(known))}")
    if quantization in IN_EVERY_RECORDED:
        return None
    what = f"vLLM {version}" if version else "the vLLM of this image"
    has = [v for v, methods in BY_VERSION.items() if quantization in methods]
    return (f"{quantization!r} is not a quantization method of every vLLM tritonbuild has recorded, and the methods "
            f"of {what} are not recorded (it is in vLLM {', '.join(has)})",
            f"use an image shipping vLLM {', '.join(has)}, or one of: {', '.join(sorted(IN_EVERY_RECORDED))}")


# what vLLM's AWQ / GPTQ override_quantization_method turns a checkpoint of that quant_method into, beside the
# method itself: its Marlin method in every recorded vLLM, and auto_awq / auto_gptq where the version has them
# (tests/contracts/facts/vllm_quantization.json, per vLLM wheel)
MARLIN = {"awq": "awq_marlin", "gptq": "gptq_marlin"}


def checkpoint_methods(quant_method: str, triton_image: str) -> set[str]:
    """The engine_args.quantization values the image's vLLM loads a checkpoint of this quant_method with."""
    known = BY_VERSION.get(image_vllm(triton_image), IN_EVERY_RECORDED)
    auto = {f"auto_{quant_method}"} & known if quant_method in MARLIN else set()
    return {quant_method, *([MARLIN[quant_method]] if quant_method in MARLIN else []), *auto}
