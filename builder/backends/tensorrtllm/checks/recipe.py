"""A TensorRT-LLM recipe's cross-field rules (run at load), and the generated config.pbtxt files of
one group against each other. The engine's config.json against the recipe: engine.py.
"""

from __future__ import annotations

from tritonbuild.backends.llm.gpus import GPU_SM
from tritonbuild.backends.llm.images import image_problem, image_versions
from tritonbuild.backends.tensorrtllm.llmapi.keys import route_problems
from tritonbuild.backends.tensorrtllm.quant import FORMATS, LLMAPI_FORMATS, arch_problem
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
from tritonbuild.backends.tensorrtllm.route import LLMAPI_SINCE, version_tuple
from tritonbuild.backends.tensorrtllm.speculative import built_limits
from tritonbuild.backends.tensorrtllm.speculative import recipe_rules as speculative_rules


def check_recipe(recipe: LLMRecipe) -> list[tuple]:
    """Cross-field rules of a TensorRT-LLM recipe, each tied to the key to change (run at load)."""
    return _limit_rules(recipe) + _route_rules(recipe) + _gpu_and_image_rules(recipe)


def _limit_rules(recipe: LLMRecipe) -> list[tuple]:
    """The engine's limits, paged context FMHA and the GPUs against each other."""
    out = []
    engine, kv_cache, serving = recipe.engine, recipe.kv_cache, recipe.serving
    if engine.max_seq_len < engine.max_input_len:
        out.append(
            (
                ("engine", "max_seq_len"),
                f"max_seq_len {engine.max_seq_len} < max_input_len {engine.max_input_len}",
                "max_seq_len counts input + output tokens: raise it to at least max_input_len",
            )
        )
    if kv_cache.enable_block_reuse and not engine.use_paged_context_fmha:
        out.append(
            (
                ("kv_cache", "enable_block_reuse"),
                "KV block reuse needs an engine built with paged context "
                "FMHA (TensorRT-LLM asserts at load)",
                "set engine.use_paged_context_fmha: true",
            )
        )
    if serving.enable_chunked_context and not engine.use_paged_context_fmha:
        out.append(
            (
                ("serving", "enable_chunked_context"),
                "chunked context needs paged context FMHA",
                "set engine.use_paged_context_fmha: true",
            )
        )
    world = engine.tp_size * engine.pp_size
    if len(serving.gpu_device_ids) % world:
        out.append(
            (
                ("serving", "gpu_device_ids"),
                f"{len(serving.gpu_device_ids)} GPUs is not a multiple of "
                f"tp_size × pp_size = {world}",
                f"list {world} GPU ids per instance",
            )
        )
    seq = built_limits(recipe)["max_seq_len"] if recipe.runtime == "engine" else engine.max_seq_len
    if kv_cache.max_tokens is not None and kv_cache.max_tokens < seq:
        out.append(
            (
                ("kv_cache", "max_tokens"),
                f"max_tokens {kv_cache.max_tokens} cannot hold one sequence of "
                f"max_seq_len {seq}"
                + (
                    f" ({engine.max_seq_len} + max_draft_len, as trtllm-build builds it)"
                    if seq != engine.max_seq_len
                    else ""
                ),
                "raise kv_cache.max_tokens or lower engine.max_seq_len",
            )
        )
    return out


def _route_rules(recipe: LLMRecipe) -> list[tuple]:
    """What the chosen route (engine or the LLM API) cannot do with the recipe's quantization, KV
    cache, speculative mode and keys, and the image's TensorRT-LLM it needs."""
    out = []
    kv_cache = recipe.kv_cache
    if recipe.runtime == "pytorch" and recipe.quantization == "int4_weight_only":
        out.append(
            (
                ("quantization",),
                "int4_weight_only (RTN W4A16) exists only on the TensorRT engine path; the "
                "PyTorch/LLM-API runtime loads checkpoints that ModelOpt already quantized "
                "(hf_quant_config.json)",
                "use runtime: engine, or a ModelOpt-quantized checkpoint with quantization: "
                "int4_awq or fp8",
            )
        )
    out += quantization_rules(recipe) + speculative_rules(recipe) + route_problems(recipe)
    trtllm = image_versions(recipe.image)["tensorrt_llm"]
    if recipe.runtime == "pytorch" and version_tuple(trtllm) < LLMAPI_SINCE:
        out.append(
            (
                ("runtime",),
                f"runtime: pytorch needs TensorRT-LLM 1.0 or newer (its LLM API on the PyTorch "
                f"backend); {recipe.image.triton_image} ships {trtllm}",
                "use runtime: engine, or an image with TensorRT-LLM 1.0+ (NGC 25.09 or newer)",
            )
        )
    if recipe.runtime == "pytorch" and kv_cache.dtype == "int8":
        out.append(
            (
                ("kv_cache", "dtype"),
                "the PyTorch/LLM-API runtime applies only an fp8 KV cache "
                "(TorchLlmArgs syncs kv_cache_config.dtype fp8 alone)",
                "use kv_cache.dtype: fp8 or auto",
            )
        )
    return out


def _gpu_and_image_rules(recipe: LLMRecipe) -> list[tuple]:
    """FP8 and bfloat16 against the GPU's compute capability, the image against its tables, and
    the fp8 weights' KV cache."""
    out = []
    kv_cache = recipe.kv_cache
    sm = GPU_SM[recipe.gpu]
    if sm < 8.9 and "fp8" in (recipe.quantization, kv_cache.dtype):
        key = ("quantization",) if recipe.quantization == "fp8" else ("kv_cache", "dtype")
        out.append(
            (
                key,
                f"FP8 needs a GPU of compute capability 8.9 or newer; {recipe.gpu} is {sm}",
                "use quantization: int4_weight_only / int4_awq and kv_cache.dtype: int8 or auto, "
                "or an H100/H200/L40S/L4",
            )
        )
    if sm < 8.0 and recipe.dtype == "bfloat16":
        out.append(
            (
                ("dtype",),
                f"bfloat16 needs compute capability 8.0 or newer; {recipe.gpu} is {sm}",
                "use dtype: float16",
            )
        )
    if (problem := image_problem(recipe.image)) is not None:
        out.append(
            (("image", "ships" if "image.ships" in problem[0] else "trtllm_version"), *problem)
        )
    if recipe.quantization == "fp8" and kv_cache.dtype == "int8":
        out.append(
            (
                ("kv_cache", "dtype"),
                "int8 KV cache with fp8 weights is not a TensorRT-LLM combination",
                "use kv_cache.dtype: fp8 or auto",
            )
        )
    return out


def quantization_rules(recipe: LLMRecipe) -> list[tuple]:
    """The quantization's route and GPU architecture (quant.FORMATS, from upstream's support
    matrices)."""
    out = []
    q = recipe.quantization
    if recipe.runtime == "pytorch" and q not in LLMAPI_FORMATS and q != "int4_weight_only":
        out.append(
            (
                ("quantization",),
                f"{q} ({FORMATS[q].what}) exists only on the TensorRT engine route; the "
                "PyTorch/LLM-API runtime has no such format",
                f"use runtime: engine, or one of {', '.join(LLMAPI_FORMATS)}",
            )
        )
    elif (problem := arch_problem(q, recipe.runtime, recipe.gpu, GPU_SM[recipe.gpu])) is not None:
        out.append((("quantization",), *problem))
    return out


def config_problems(configs: dict[str, object], names) -> list[str]:
    """Generated (or hand-edited) configs of one group vs each other: decoupled mode, batch
    sizes."""
    out = []
    llm, bls = configs.get(names.tensorrt_llm), configs.get(names.bls)
    if (
        llm is not None
        and bls is not None
        and llm.model_transaction_policy.decoupled != bls.model_transaction_policy.decoupled
    ):
        out.append(
            f"{names.tensorrt_llm} decoupled={llm.model_transaction_policy.decoupled} but "
            f"{names.bls} decoupled={bls.model_transaction_policy.decoupled}: streaming must be "
            "set on both"
        )
    ens = configs.get(names.ensemble)
    if ens is not None:
        for step in ens.ensemble_scheduling.step:
            other = configs.get(step.model_name)
            if (
                other is not None
                and other.max_batch_size
                and ens.max_batch_size > other.max_batch_size
            ):
                out.append(
                    f"ensemble max_batch_size {ens.max_batch_size} > {step.model_name}'s "
                    f"{other.max_batch_size}"
                )
    return out
