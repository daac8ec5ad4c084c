"""engine_args.extra: any other AsyncEngineArgs field of the image's vLLM (kv_cache_dtype,
max_num_batched_tokens, enable_chunked_prefill, served_model_name, ...), written into model.json as
given (vllm_backend passes model.json to AsyncEngineArgs(**...)). Checked against the fields
recorded for the image's vLLM (versions.py, from the wheels' facts; an image whose vLLM
is not recorded takes what every recorded version has): a field it lacks is a recipe error with a
did-you-mean and the images whose vLLM has it. A value is checked against the field's type as that
vLLM's wheel annotates it (versions.py `types`: bool, int, float, str, null, list, dict, a
Literal's values; "any" where the annotation is a class: not checked); where the image's vLLM's types
are not recorded, a value is refused when every recorded vLLM refuses it and at least two recorded
vLLMs give the field the same kind of type (a type that changed says nothing of other releases). A
typed engine_args field and the fields tritonbuild writes itself (model, LoRA's, speculative_config)
cannot be set through it."""

from __future__ import annotations

import difflib

from tritonbuild.backends.vllm.versions import (
    ENGINE_ARGS,
    TABLE,
    image_vllm,
    images_where,
    recorded_engine_args,
)

# vLLM version → field → what its JSON value may be (recorded from that version's wheel)
TYPES = {v: t["types"] for v, t in TABLE.items() if "types" in t}

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
    fields, what = recorded_engine_args(triton_image)
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
        elif problem := type_problem(key, extra[key], version):
            out.append((at, *problem))
    return out


def _takes(accepts: list, value) -> bool:
    kinds = {
        "null": lambda v: v is None,
        "bool": lambda v: isinstance(v, bool),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
        "list": lambda v: isinstance(v, list),
        "dict": lambda v: isinstance(v, dict),
        "any": lambda v: True,
    }
    return any(
        any(x == value and type(x) is type(value) for x in a["literal"])
        if isinstance(a, dict)
        else kinds[a](value)
        for a in accepts
    )


def _words(accepts: list) -> str:
    return " or ".join(
        "one of " + ", ".join(map(str, a["literal"])) if isinstance(a, dict) else a for a in accepts
    )


def type_problem(key: str, value, version: str | None) -> tuple[str, str] | None:
    """(message, hint) when the image's vLLM's AsyncEngineArgs.<key> does not take value (its
    recorded type), or, where that vLLM's types are not recorded, when no recorded vLLM does."""
    if version in TYPES:
        accepts = TYPES[version].get(key, ["any"])
        if _takes(accepts, value):
            return None
        return (
            f"{value!r} is not what vLLM {version}'s AsyncEngineArgs.{key} takes ({_words(accepts)}): "
            "vLLM refuses model.json at load",
            f"give {key} {_words(accepts)}",
        )
    recorded = {v: t[key] for v, t in TYPES.items() if key in t}
    kinds = {
        frozenset("literal" if isinstance(a, dict) else a for a in r) for r in recorded.values()
    }
    # a type that changed between the recorded releases, or seen in one, says nothing of others
    if len(recorded) < 2 or len(kinds) > 1 or any(_takes(a, value) for a in recorded.values()):
        return None
    newest = max(recorded, key=lambda v: [int(p) for p in v.split(".") if p.isdigit()])
    return (
        f"{value!r} is not what AsyncEngineArgs.{key} takes in any vLLM whose types tritonbuild "
        f"recorded ({', '.join(sorted(recorded))}; the image's vLLM {version or '?'} is not): vLLM "
        "refuses model.json at load",
        f"give {key} {_words(recorded[newest])} (vLLM {newest})",
    )


def _hint(key: str, fields: frozenset[str]) -> str:
    close = difflib.get_close_matches(key, sorted(fields), n=3)
    mean = f"did you mean {' or '.join(close)}? " if close else ""
    if any(key in args for args in ENGINE_ARGS.values()):
        return (
            f"{mean}use an image whose vLLM has it, newest first: "
            f"{images_where(lambda v: key in ENGINE_ARGS[v])}"
        )
    return f"{mean}no recorded vLLM has {key} (tritonbuild facts/vllm_engine_args.json)"
