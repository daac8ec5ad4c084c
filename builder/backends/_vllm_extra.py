"""engine_args.extra: any other AsyncEngineArgs field of the image's vLLM (kv_cache_dtype,
max_num_batched_tokens, enable_chunked_prefill, served_model_name, ...), written into model.json as
given (vllm_backend passes model.json to AsyncEngineArgs(**...)). Checked against the fields
recorded for the image's vLLM (vllm_versions.json engine_args, from the wheels; an image whose vLLM
is not recorded takes what every recorded version has): a field it lacks is a recipe error with a
did-you-mean and the images whose vLLM has it. A typed engine_args field and the fields tritonbuild
writes itself (model, LoRA's, speculative_config) cannot be set through it."""

from __future__ import annotations

import difflib

from tritonbuild.backends._vllm_quantization import (
    ARGS_IN_EVERY_RECORDED,
    ENGINE_ARGS,
    image_vllm,
    images_where,
)

# model.json keys tritonbuild writes from other recipe keys → the recipe key that sets them
OWNED = {
    "model": "checkpoint.path (model.json's model is the packaged checkpoint where the server "
    "sees it)",
    "enable_lora": "lora.adapters",
    "max_lora_rank": "lora.max_lora_rank",
    "max_loras": "lora.max_loras",
    "speculative_config": "speculative",
}


def extra_problems(extra: dict, triton_image: str, typed: set[str]) -> list:
    """(recipe key path, message, hint) per engine_args.extra key that tritonbuild owns, that a
    typed field sets, or that the image's vLLM's AsyncEngineArgs lacks."""
    version = image_vllm(triton_image)
    fields = ENGINE_ARGS.get(version, ARGS_IN_EVERY_RECORDED)
    what = (
        f"vLLM {version}"
        if version in ENGINE_ARGS
        else f"every recorded vLLM (that of {triton_image} is not)"
    )
    out = []
    for key in sorted(extra):
        at = ("engine_args", "extra", key)
        if key in OWNED:
            out.append(
                (
                    at,
                    f"model.json's {key} is written by tritonbuild from {OWNED[key]}",
                    f"remove engine_args.extra.{key}; set {OWNED[key].split(' ')[0]} instead",
                )
            )
        elif key in typed:
            out.append(
                (
                    at,
                    f"{key} is a typed engine_args field: it would be set twice",
                    f"move it to engine_args.{key} and remove engine_args.extra.{key}",
                )
            )
        elif key not in fields:
            out.append(
                (
                    at,
                    f"{key} is not a field of {what}'s AsyncEngineArgs: vLLM refuses model.json at "
                    "load",
                    _hint(key, fields),
                )
            )
    return out


def _hint(key: str, fields: frozenset[str]) -> str:
    close = difflib.get_close_matches(key, sorted(fields), n=3)
    mean = f"did you mean {' or '.join(close)}? " if close else ""
    if any(key in args for args in ENGINE_ARGS.values()):
        return (
            f"{mean}use an image whose vLLM has it, newest first: "
            f"{images_where(lambda v: key in ENGINE_ARGS[v])}"
        )
    return f"{mean}no recorded vLLM has {key} (tests/contracts/facts/vllm_engine_args.json)"
