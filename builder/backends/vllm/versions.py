"""What each vLLM a serving image ships takes, per recorded version (the package's
facts/vllm_engine_args.json, vllm_quantization.json and vllm_speculative.json, read from the vLLM
wheels by `python -m tests.contracts.refresh vllm-wheel WHEEL... --write`): the model.json keys
(AsyncEngineArgs), the quantization methods
(QuantizationMethods), the quantization values it loads an AWQ / GPTQ checkpoint with
(override_quantization_method) and its speculative methods (SpeculativeConfig; None where
AsyncEngineArgs has no speculative_config). An image whose vLLM is not recorded (a tag outside the
image table, or a version the registry has no wheel of) takes what every recorded version has."""

from __future__ import annotations

from tritonbuild.backends.llm.images import VLLM_IMAGES
from tritonbuild.core import facts


def _table() -> dict[str, dict]:
    """Per recorded vLLM, what the builder needs: the model.json keys it takes, its quantization
    methods, the quantization values it loads an AWQ / GPTQ checkpoint with, its speculative methods
    (None without speculative_config) with whether it runs draft_model (None: not known), and each
    engine arg's JSON types where the wheel's annotations were read."""
    engine_args, quantization, speculative = (
        facts.load(f"vllm_{n}") for n in ("engine_args", "quantization", "speculative")
    )
    by, spec = quantization["marlin_override"]["by_version"], speculative["versions"]
    return {
        v: {
            "engine_args": e["AsyncEngineArgs"],
            "quantization": sorted(e["quantization_methods"]["values"]),
            "checkpoint": by[v]["accepted"],
            "speculative": (
                {"methods": spec[v]["methods"], "draft_model_runs": spec[v]["draft_model"]["runs"]}
                if spec[v]["speculative_config"]
                else None
            ),
            **({"types": {f: t["accepts"] for f, t in e["types"].items()}} if "types" in e else {}),
        }
        for v, e in engine_args["versions"].items()
    }


TABLE = _table()
# vLLM version: its quantization methods / AsyncEngineArgs fields
BY_VERSION = {v: frozenset(t["quantization"]) for v, t in TABLE.items()}
ENGINE_ARGS = {v: frozenset(t["engine_args"]) for v, t in TABLE.items()}
SPECULATIVE = {v: t["speculative"] for v, t in TABLE.items() if t["speculative"] is not None}
IN_EVERY_RECORDED = frozenset.intersection(*BY_VERSION.values())
ARGS_IN_EVERY_RECORDED = frozenset.intersection(*ENGINE_ARGS.values())
ALL = tuple(sorted(set().union(*BY_VERSION.values())))


def image_vllm(triton_image: str) -> str | None:
    """The vLLM an NGC tritonserver:<tag>-vllm-python-py3 image ships (llm/images.py), else None."""
    prefix, suffix = "nvcr.io/nvidia/tritonserver:", "-vllm-python-py3"
    if triton_image.startswith(prefix) and triton_image.endswith(suffix):
        return VLLM_IMAGES.get(triton_image[len(prefix) : -len(suffix)])
    return None


def images_where(has) -> str:
    """The image tags (newest first, each with its vLLM) whose recorded vLLM satisfies has(version),
    for a hint."""
    tags = sorted(
        (t for t, v in VLLM_IMAGES.items() if v in TABLE and has(v)), key=_vkey, reverse=True
    )
    if not tags:
        return "none of the recorded images (tritonserver:<tag>-vllm-python-py3)"
    return "tritonserver:<tag>-vllm-python-py3 with <tag> " + ", ".join(
        f"{t} (vLLM {VLLM_IMAGES[t]})" for t in tags
    )


def quantization_problem(quantization: str | None, triton_image: str) -> tuple[str, str] | None:
    """(message, hint) when the image's vLLM has no such quantization method, else None."""
    if quantization is None:
        return None
    version = image_vllm(triton_image)
    known = BY_VERSION.get(version)
    if known is not None:
        if quantization in known:
            return None
        return (
            f"{triton_image} ships vLLM {version}, whose QuantizationMethods has no "
            f"{quantization!r}",
            f"one of: {', '.join(sorted(known))}",
        )
    if quantization in IN_EVERY_RECORDED:
        return None
    what = f"vLLM {version}" if version else "the vLLM of this image"
    has = [v for v, methods in BY_VERSION.items() if quantization in methods]
    return (
        f"{quantization!r} is not a quantization method of every vLLM tritonbuild has recorded, "
        f"and the methods of {what} are not recorded (it is in vLLM {', '.join(has)})",
        f"use an image shipping vLLM {', '.join(has)}, or one of: "
        f"{', '.join(sorted(IN_EVERY_RECORDED))}",
    )


def checkpoint_methods(quant_method: str, triton_image: str) -> set[str]:
    """The engine_args.quantization values the image's vLLM loads a checkpoint of this quant_method
    with: what its override_quantization_method accepts (the method itself, its Marlin kernel,
    auto_awq / auto_gptq where the version has them), or what every recorded vLLM accepts when the
    image's is not recorded."""
    version = image_vllm(triton_image)
    tables = [TABLE[version]] if version in TABLE else list(TABLE.values())
    accepted = [set(t["checkpoint"].get(quant_method, [quant_method])) for t in tables]
    return set.intersection(*accepted) - {"marlin"}


def recorded_engine_args(triton_image: str) -> tuple[set[str], str]:
    """The AsyncEngineArgs fields of the image's vLLM (those in every recorded vLLM where its own
    are not recorded), and how to name that vLLM in a message."""
    version = image_vllm(triton_image)
    if version in ENGINE_ARGS:
        return ENGINE_ARGS[version], f"vLLM {version}"
    return ARGS_IN_EVERY_RECORDED, f"every recorded vLLM (that of {triton_image} is not)"


def engine_args_problems(keys: set[str], triton_image: str, engine_args: set[str]) -> list:
    """(recipe key path, message, hint) per model.json key the image's vLLM AsyncEngineArgs lacks
    (vllm_backend passes model.json to AsyncEngineArgs(**...), which refuses it at load):
    engine_args.<key> for the keys of engine_args, else the recipe key that writes it (speculative,
    lora)."""
    fields, what = recorded_engine_args(triton_image)
    out = []
    for key in sorted(keys - fields):
        at = (
            ("engine_args", key)
            if key in engine_args
            else ("speculative",)
            if key == "speculative_config"
            else ("lora",)
        )
        where = images_where(lambda v, k=key: k in ENGINE_ARGS[v])
        out.append(
            (
                at,
                f"model.json would carry {key}, which {what} does not take (AsyncEngineArgs)",
                f"use an image whose vLLM has it, newest first: {where}; or leave the setting out",
            )
        )
    return out


def invariant_w4a16_problems(q: dict) -> list[str]:
    """What in a checkpoint's quantization_config (config.json) keeps its linears off tritonbuild's
    invariant W4A16 kernel (its can_implement: symmetric 4-bit uint4b8, no zero points, no g_idx;
    a compressed-tensors pack-quantized layout, the one that ran on the GPU); empty when none."""
    method = q.get("quant_method")
    if method == "awq":
        return ["zero points (AWQ is asymmetric)"] + (["8-bit"] if q.get("bits", 4) != 4 else [])
    if method == "gptq":
        return [
            r
            for r in (
                q.get("desc_act") and "activation order (desc_act, g_idx)",
                q.get("bits", 4) != 4 and f"{q.get('bits')}-bit",
                q.get("sym") is False and "zero points (sym false)",
                "GPTQ's layout is not measured",
            )
            if r
        ]
    if method != "compressed-tensors":
        return [f"{method}: not a W4A16 layout the invariant kernel takes"]
    fmt = q.get("format", "pack-quantized")
    out = [f"format {fmt}"] if fmt != "pack-quantized" else []
    for name, group in sorted((q.get("config_groups") or {}).items()):
        w = group.get("weights") or {}
        out += [
            f"{name}: {r}"
            for r in (
                w.get("num_bits") != 4 and f"{w.get('num_bits')}-bit",
                w.get("type", "int") != "int" and f"{w.get('type')} weights",
                w.get("symmetric") is False and "zero points (symmetric false)",
                w.get("actorder") is not None
                and f"activation order (actorder {w.get('actorder')}, g_idx)",
                group.get("input_activations") and "quantized activations",
            )
            if r
        ]
    return out


def _vkey(version: str) -> tuple:
    return tuple(
        int(p) if p.isdigit() else -1
        for p in version.replace("rc", ".rc.").replace("post", "").split(".")
    )
