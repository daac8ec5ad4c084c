"""The invariance table (table.py ROWS) applied to a recipe at plan: the settings it refuses, each
a recipe error at its key with the row's reason and fix; the model.json values it forces; a
pre-quantized checkpoint the invariant W4A16 kernel cannot implement."""

from __future__ import annotations

import json

from tritonbuild.backends.llm.gpus import GPU_SM
from tritonbuild.backends.vllm.invariant.table import (
    BY_ID,
    INDUCTOR_DETERMINISTIC,
    INDUCTOR_FORCED,
    MEASURED_ATTENTION,
    MEASURED_SM,
    PLUGIN_MIN_SM,
    UNMEASURED,
    VLLM_INVARIANT_ATTENTION,
)
from tritonbuild.backends.vllm.versions import invariant_w4a16_problems


def _problem(row_id: str, at: tuple, setting: str) -> tuple:
    """(row id, (key path, message, hint))."""
    row = BY_ID[row_id]
    fix = row.fix + (
        "; to measure it, set serving.allow_unmeasured: true and verify under load"
        if row.verdict == UNMEASURED
        else ""
    )
    return row_id, (at, f"{setting}: serving.determinism: invariant cannot hold: {row.why}", fix)


def recipe_problems(recipe) -> list:
    """(key path, message, hint) per setting of an invariant recipe that the table refuses (the
    rows refused only as not measured are let through with serving.allow_unmeasured)."""
    if recipe.serving.determinism != "invariant":
        return []
    allow = recipe.serving.allow_unmeasured
    return [p for row, p in _problems(recipe) if not (allow and BY_ID[row].verdict == UNMEASURED)]


def _problems(recipe) -> list:
    args, extra, out = recipe.engine_args, recipe.engine_args.extra, []
    kernel = extra.get("kernel_config") if isinstance(extra.get("kernel_config"), dict) else {}
    for at, value in (
        (("engine_args", "extra", "linear_backend"), extra.get("linear_backend", "auto")),
        (
            ("engine_args", "extra", "kernel_config", "linear_backend"),
            kernel.get("linear_backend", "auto"),
        ),
    ):
        if str(value).lower().replace("-", "_") != "auto":
            out.append(_problem("linear_backend", at, f"linear_backend {value}"))
    out += _attention(extra)
    out += _gpu(recipe)
    if recipe.lora is not None:
        out.append(
            _problem("lora", ("lora",), f"adapters {', '.join(sorted(recipe.lora.adapters))}")
        )
    for key in ("tensor_parallel_size", "pipeline_parallel_size"):
        if getattr(args, key) > 1:
            out.append(_problem("parallel", ("engine_args", key), f"{key} {getattr(args, key)}"))
    if recipe.speculative is not None:
        out.append(
            _problem("speculative", ("speculative",), f"speculative {recipe.speculative.method}")
        )
    if extra.get("kv_cache_dtype", "auto") != "auto":
        at = ("engine_args", "extra", "kv_cache_dtype")
        out.append(_problem("kv_cache_dtype", at, f"kv_cache_dtype {extra['kv_cache_dtype']}"))
    return out + _compilation(extra.get("compilation_config"))


def _compilation_mapping(config):
    """compilation_config as a mapping: a dict, its JSON text as vLLM's CLI takes it, {} unset; None
    when it is something else (an optimization level, text that is not a JSON object)."""
    if config is None:
        return {}
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return None
    return config if isinstance(config, dict) else None


# what model.json's inductor_compile_config gets (rows combo_kernels, inductor_deterministic), and the
# row that refuses another value given for each option
INDUCTOR_SET = {**INDUCTOR_FORCED, **INDUCTOR_DETERMINISTIC}
_INDUCTOR_ROW = {
    **dict.fromkeys(INDUCTOR_FORCED, "combo_kernels_on"),
    **dict.fromkeys(INDUCTOR_DETERMINISTIC, "inductor_deterministic_off"),
}


def _compilation(config) -> list:
    """compilation_config: single-size graphs or Inductor's tuning turned on by hand (row
    compile_sizes), combo kernels or their timing turned on, or a value model.json cannot carry
    the forced Inductor options in (row combo_kernels_on), Inductor's deterministic mode turned off
    (row inductor_deterministic_off)."""
    at = ("engine_args", "extra", "compilation_config")
    mapping = _compilation_mapping(config)
    if mapping is None:
        return [_problem("combo_kernels_on", at, f"compilation_config {config!r} (not a mapping)")]
    out = []
    if mapping.get("compile_sizes"):
        sizes = mapping["compile_sizes"]
        out.append(_problem("compile_sizes", (*at, "compile_sizes"), f"compile_sizes {sizes}"))
    inductor = mapping.get("inductor_compile_config")
    inductor = inductor if isinstance(inductor, dict) else {}
    for option in ("max_autotune", "coordinate_descent_tuning"):
        if inductor.get(option):
            where = (*at, "inductor_compile_config", option)
            out.append(_problem("compile_sizes", where, f"inductor_compile_config {option} on"))
    for option, value in INDUCTOR_SET.items():
        if option in inductor and bool(inductor[option]) != value:
            where = (*at, "inductor_compile_config", option)
            said = f"inductor_compile_config {option} {'on' if inductor[option] else 'off'}"
            out.append(_problem(_INDUCTOR_ROW[option], where, said))
    return out


def _attention(extra: dict) -> list:
    config = (
        extra.get("attention_config") if isinstance(extra.get("attention_config"), dict) else {}
    )
    out = []
    for at, value in (
        (("engine_args", "extra", "attention_backend"), extra.get("attention_backend")),
        (("engine_args", "extra", "attention_config", "backend"), config.get("backend")),
    ):
        name = str(value).upper() if value is not None else None
        if name is None or name in MEASURED_ATTENTION:
            continue
        row = "attention_unmeasured" if name in VLLM_INVARIANT_ATTENTION else "attention_refused"
        out.append(_problem(row, at, f"attention backend {value}"))
    return out


def _gpu(recipe) -> list:
    sm = GPU_SM[recipe.gpu]
    if sm < PLUGIN_MIN_SM:
        return [_problem("gpu_below_sm80", ("gpu",), f"gpu {recipe.gpu} (compute capability {sm})")]
    if sm > MEASURED_SM:
        return [_problem("gpu_unmeasured", ("gpu",), f"gpu {recipe.gpu} (compute capability {sm})")]
    args = recipe.engine_args
    if sm < MEASURED_SM and "enforce_eager" in args.model_fields_set and not args.enforce_eager:
        return [
            _problem(
                "gpu_sm8x_graphs",
                ("engine_args", "enforce_eager"),
                f"enforce_eager false (CUDA graphs on) on gpu {recipe.gpu} (compute capability {sm}, "
                "below 9.0)",
            )
        ]
    return []


def forced(recipe) -> dict:
    """The model.json values the table forces for an invariant recipe: enforce_eager below SM 9.0
    (row gpu_sm8x_eager); Inductor's combo kernels and their timing off and its deterministic mode
    on, merged into the recipe's own compilation_config (rows combo_kernels, inductor_deterministic;
    one that is not a mapping is refused at plan)."""
    if recipe.serving.determinism != "invariant":
        return {}
    out = {}
    if PLUGIN_MIN_SM <= GPU_SM[recipe.gpu] < MEASURED_SM:
        out["enforce_eager"] = True
    config = _compilation_mapping(recipe.engine_args.extra.get("compilation_config"))
    if config is not None:
        inductor = config.get("inductor_compile_config")
        inductor = dict(inductor) if isinstance(inductor, dict) else {}
        out["compilation_config"] = {
            **config,
            "inductor_compile_config": {**inductor, **INDUCTOR_SET},
        }
    return out


def checkpoint_problem(recipe, config: dict) -> tuple[str, str] | None:
    """(message, hint) when an invariant recipe serves a pre-quantized checkpoint the invariant
    W4A16 kernel cannot implement (config.json's quantization_config), else None. The quantize
    step's own output is tritonbuild's INT4 (checked by the step, which refuses a quantized input)."""
    if recipe.serving.determinism != "invariant" or recipe.quantize is not None:
        return None
    q = config.get("quantization_config")
    if not isinstance(q, dict):
        return None
    reasons = invariant_w4a16_problems(q)
    if not reasons:
        return None
    row = BY_ID["checkpoint_quantized"]
    return (
        f"config.json's quantization_config ({q.get('quant_method', '?')}: {'; '.join(reasons)}): "
        f"serving.determinism: invariant cannot hold: {row.why}",
        row.fix,
    )
