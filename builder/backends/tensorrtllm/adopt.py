"""`tritonbuild adopt` of a filled tensorrtllm_backend group (preprocessing / tensorrt_llm /
postprocessing / ensemble / tensorrt_llm_bls, as fill_template.py fills them): an LLM recipe
assembled around the prebuilt engine the tensorrt_llm model serves (gpt_model_path; `build --engine
NAME=DIR`). The engine's config.json gives the engine limits and quantization (and lookahead
decoding, its limits less the draft trtllm-build added); the group's configs give the serving
settings the recipe has keys for; a set parameter it has none for is refused by name. The recipe is
named after the group's ensemble."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tritonbuild.backends.tensorrtllm.quant import ENGINE_ALGOS
from tritonbuild.backends.tensorrtllm.recipe.speculative import lookahead_draft_len
from tritonbuild.backends.tensorrtllm.speculative import SPECULATIVE_DECODING_MODES
from tritonbuild.errors import UsageError
from tritonbuild.triton.batching import read_dynamic_batching
from tritonbuild.triton.config import ConfigParseError, read_config

_HINT = (
    "publish the repository as it is ('tritonbuild publish DIR URL'), or write the group's recipe "
    "by hand"
)
_BOOL = {"true": True, "false": False}


def _ints(value: str) -> list[int]:
    return [int(x) for x in value.replace(";", ",").split(",") if x.strip()]


# tensorrt_llm parameter → (recipe section, key, parse)
PARAMETERS = {
    "gpt_model_type": ("serving", "batching_strategy", str),
    "batch_scheduler_policy": ("serving", "scheduler_policy", str),
    "exclude_input_in_output": ("serving", "exclude_input_in_output", _BOOL.__getitem__),
    "enable_chunked_context": ("serving", "enable_chunked_context", _BOOL.__getitem__),
    "gpu_device_ids": ("serving", "gpu_device_ids", _ints),
    "guided_decoding_backend": ("serving", "guided_decoding", lambda v: {"backend": v}),
    "kv_cache_free_gpu_mem_fraction": ("kv_cache", "free_gpu_mem_fraction", float),
    "enable_kv_cache_reuse": ("kv_cache", "enable_block_reuse", _BOOL.__getitem__),
    "max_tokens_in_paged_kv_cache": ("kv_cache", "max_tokens", int),
    "kv_cache_host_memory_bytes": ("kv_cache", "host_memory_bytes", int),
    "kv_cache_onboard_blocks": ("kv_cache", "onboard_blocks", _BOOL.__getitem__),
    "max_attention_window_size": ("kv_cache", "max_attention_window_size", _ints),
    "sink_token_length": ("kv_cache", "sink_token_length", int),
    "gpu_weights_percent": ("executor", "gpu_weights_percent", float),
    "multi_block_mode": ("executor", "multi_block_mode", _BOOL.__getitem__),
    "enable_context_fmha_fp32_acc": ("executor", "enable_context_fmha_fp32_acc", _BOOL.__getitem__),
    "cuda_graph_mode": ("executor", "cuda_graph_mode", _BOOL.__getitem__),
    "cancellation_check_period_ms": ("executor", "cancellation_check_period_ms", int),
    "stats_check_period_ms": ("executor", "stats_check_period_ms", int),
    "iter_stats_max_iterations": ("executor", "iter_stats_max_iterations", int),
    "request_stats_max_iterations": ("executor", "request_stats_max_iterations", int),
}
# parameters the recipe's group writes itself (engine path, tokenizer, the worker path): read, not
# carried
CONSUMED = {
    "gpt_model_path",
    "tokenizer_dir",
    "xgrammar_tokenizer_info_path",
    "executor_worker_path",
    "max_beam_width",
    "FORCE_CPU_ONLY_INPUT_TENSORS",
    "normalize_log_probs",
}
# the Python models' parameters the group's own models take from the recipe (or need not)
PYTHON_CONSUMED = {
    "tokenizer_dir",
    "add_special_tokens",
    "skip_special_tokens",
    "tensorrt_llm_model_name",
}


def _set(value: str) -> bool:
    """fill_template.py leaves ${name} where the command line gave nothing: unset, the backend's
    default."""
    return bool(value) and not value.startswith("${")


def _params(mc) -> dict[str, str]:
    return {
        key: value.string_value for key, value in mc.parameters.items() if _set(value.string_value)
    }


def _siblings(root: Path) -> dict[str, object]:
    out = {}
    for model_dir in sorted(d for d in root.iterdir() if (d / "config.pbtxt").is_file()):
        try:
            out[model_dir.name] = read_config(model_dir)
        except ConfigParseError:  # the stage refuses it, naming the file
            continue
    return out


def group_of(model_dir: Path) -> dict[str, str]:
    """The group around the tensorrt_llm model at model_dir: role → model name (ensemble,
    preprocessing, postprocessing, bls), found as Triton would: the ensemble whose steps call it,
    that ensemble's other steps, and a Python model whose tensorrt_llm_model_name names it
    (upstream's BLS default: tensorrt_llm)."""
    configs, name = _siblings(model_dir.parent), model_dir.name
    out = {}
    for other, mc in configs.items():
        steps = [s.model_name for s in mc.ensemble_scheduling.step]
        if name in steps and len(steps) == 3 and steps.index(name) == 1:
            out |= {"ensemble": other, "preprocessing": steps[0], "postprocessing": steps[2]}
        params = {k: v.string_value for k, v in mc.parameters.items()}
        if "tensorrt_llm_model_name" in params:
            called = (
                params["tensorrt_llm_model_name"]
                if _set(params["tensorrt_llm_model_name"])
                else "tensorrt_llm"
            )
            if called == name:
                out["bls"] = other
    return out


def _refuse(model: str, what: str, where: Path, hint: str = _HINT) -> UsageError:
    return UsageError(f"{model}: {what}", where=str(where / "config.pbtxt"), hint=hint)


def _serving(mc, model_dir: Path, recipe: dict) -> None:
    """tensorrt_llm's parameters and config fields into the recipe's sections."""
    params = _params(mc)
    taken = (
        LOOKAHEAD_PARAMETERS if (recipe.get("speculative") or {}).get("mode") == "lookahead" else ()
    )
    unheld = sorted(
        k for k in params if k not in PARAMETERS and k not in CONSUMED and k not in taken
    )
    if unheld:
        raise _refuse(model_dir.name, f"parameters {unheld} have no recipe key yet", model_dir)
    for key, value in sorted(params.items()):
        if key in PARAMETERS:
            section, field, convert = PARAMETERS[key]
            try:
                recipe.setdefault(section, {})[field] = convert(value)
            except (KeyError, ValueError):
                raise _refuse(
                    model_dir.name,
                    f"parameter {key} = {value!r} does not parse",
                    model_dir,
                    "true/false for switches, numbers for sizes",
                ) from None
    serving = recipe.setdefault("serving", {})
    # unset: the C++ backend's default, false (the recipe's own default is true; README,
    # TensorRT-LLM section)
    serving.setdefault("exclude_input_in_output", False)
    serving["streaming"] = mc.model_transaction_policy.decoupled
    batching = read_dynamic_batching(mc) or {}
    serving["max_queue_delay_us"] = batching.get("max_queue_delay_us", 0)
    serving["max_queue_size"] = batching.get("default_queue_policy", {}).get("max_queue_size", 0)
    if any(g.count > 1 for g in mc.instance_group):
        raise _refuse(
            model_dir.name,
            "instance_group count > 1 has no recipe key (the group serves one "
            "tensorrt_llm instance; serving.gpu_device_ids places more)",
            model_dir,
        )


def _python_models(root: Path, group: dict[str, str], recipe: dict) -> str | None:
    """Instance counts, add_special_tokens, the BLS; the tokenizer_dir preprocessing names."""
    serving, tokenizer = recipe.setdefault("serving", {}), None
    serving["bls"] = "bls" in group
    for role in ("preprocessing", "postprocessing", "bls"):
        if role not in group:
            continue
        model_dir = root / group[role]
        mc = read_config(model_dir)
        serving.setdefault("instances", {})[role] = (
            sum(g.count or 1 for g in mc.instance_group) or 1
        )
        params = _params(mc)
        unheld = sorted(k for k in params if k not in PYTHON_CONSUMED)
        if params.get("skip_special_tokens", "true").lower() != "true":
            unheld.append("skip_special_tokens")
        if unheld:
            raise _refuse(
                model_dir.name, f"parameters {sorted(unheld)} have no recipe key yet", model_dir
            )
        if "add_special_tokens" in params and role == "preprocessing":
            serving["add_special_tokens"] = params["add_special_tokens"].lower() == "true"
        tokenizer = tokenizer or params.get("tokenizer_dir")
    return tokenizer


def _engine(mc, model_dir: Path) -> tuple[Path, dict]:
    path = mc.parameters["gpt_model_path"].string_value if "gpt_model_path" in mc.parameters else ""
    if not _set(path) or not (Path(path) / "config.json").is_file():
        raise _refuse(
            model_dir.name,
            f"gpt_model_path {path!r} is not an engine directory here (config.json and "
            "rank*.engine): the recipe is assembled around that prebuilt engine",
            model_dir,
            "adopt on the machine that holds the engine, or point gpt_model_path at a copy of it",
        )
    return Path(path), json.loads((Path(path) / "config.json").read_text())


def _engine_keys(engine: dict) -> dict:
    bc, pc = engine.get("build_config") or {}, engine.get("pretrained_config") or {}
    mapping, plugin = pc.get("mapping") or {}, bc.get("plugin_config") or {}
    limits = {
        key: int(bc[key])
        for key in (
            "max_batch_size",
            "max_input_len",
            "max_seq_len",
            "max_num_tokens",
            "max_beam_width",
        )
        if bc.get(key) is not None
    }
    limits |= {
        "tp_size": int(mapping.get("tp_size", 1)),
        "pp_size": int(mapping.get("pp_size", 1)),
        "use_paged_context_fmha": bool(plugin.get("use_paged_context_fmha", False)),
        "logits_dtype": pc.get("logits_dtype", "float32"),
    }
    algo = (pc.get("quantization") or {}).get("quant_algo")
    names = [name for name, algos in ENGINE_ALGOS.items() if algo in algos]
    if len(names) != 1:
        raise UsageError(
            f"the engine's quant_algo {algo!r} maps to no single recipe quantization ({names})",
            hint=_HINT,
        )
    out = {"quantization": names[0], "engine": limits}
    if pc.get("dtype") in ("float16", "bfloat16"):
        out["dtype"] = pc["dtype"]
    if plugin.get("tokens_per_block") is not None:
        out["kv_cache"] = {"tokens_per_block": int(plugin["tokens_per_block"])}
    if engine.get("version"):
        out["image"] = {"trtllm_version": str(engine["version"])}
    return out


# the tensorrt_llm parameters that run lookahead decoding (facts/trtllm_speculative.json backend)
LOOKAHEAD_PARAMETERS = (
    "decoding_mode",
    "lookahead_window_size",
    "lookahead_ngram_size",
    "lookahead_verification_set_size",
)


def _engine_mode(engine: dict) -> tuple[str, int]:
    """(build_config.speculative_decoding_mode as trtllm-build's choice name, max_draft_len) of
    config.json."""
    bc = engine.get("build_config") or {}
    mode = bc.get("speculative_decoding_mode", 1)
    name = (
        SPECULATIVE_DECODING_MODES.get(mode, f"{mode} (unknown)")
        if isinstance(mode, int)
        else str(mode)
    )
    return name, int(bc.get("max_draft_len") or 0)


def _speculative(mc, model_dir: Path, engine_dir: Path, engine: dict) -> dict | None:
    """The recipe's speculative section for an engine built with speculative decoding (None
    without): lookahead's (W, N, G) from the tensorrt_llm parameters that run it, checked against
    the engine's max_draft_len. A mode the engine route's recipe cannot express is refused naming
    it."""
    mode, draft = _engine_mode(engine)
    if mode == "none":
        return None
    where = engine_dir / "config.json"
    if mode != "lookahead_decoding":
        raise _unexpressible_mode(mode, draft, where)
    return _lookahead(mc, model_dir, where, draft)


def _unexpressible_mode(mode: str, draft: int, where: Path) -> UsageError:
    """The error for a speculative mode an adopted recipe cannot say (medusa: its heads directory
    is recorded nowhere)."""
    why = (
        "speculative.mode medusa needs heads_checkpoint, the Medusa heads directory the engine was "
        "converted from, which neither the engine nor the group records"
        if mode == "medusa"
        else "the engine route's recipe builds lookahead_decoding and medusa engines only"
    )
    hint = (
        (
            "write the recipe by hand with speculative: {mode: medusa, heads_checkpoint: <the "
            f"heads directory>, max_draft_len: {draft}, medusa_choices: <tensorrt_llm's "
            "medusa_choices>}, or publish the repository as it is ('tritonbuild publish DIR URL')"
        )
        if mode == "medusa"
        else _HINT
    )
    return UsageError(
        f"the engine was built with build_config.speculative_decoding_mode {mode} (max_draft_len "
        f"{draft}): {why}",
        where=str(where),
        hint=hint,
    )


def _lookahead(mc, model_dir: Path, where: Path, draft: int) -> dict:
    """speculative.lookahead's (W, N, G) from the tensorrt_llm parameters, checked against the
    engine's max_draft_len."""
    params = _params(mc)
    if params.get("decoding_mode", "lookahead") != "lookahead":
        raise _refuse(
            model_dir.name,
            f"decoding_mode {params['decoding_mode']!r} does not run the engine's "
            "lookahead_decoding",
            model_dir,
            "set decoding_mode lookahead, or adopt a non-speculative engine",
        )
    missing = [k for k in LOOKAHEAD_PARAMETERS[1:] if k not in params]
    if missing:
        raise _refuse(
            model_dir.name,
            f"the engine was built with lookahead_decoding (max_draft_len {draft}) but "
            f"parameters {missing} are unset: the recipe's speculative.lookahead needs (W, N, G)",
            model_dir,
            "fill lookahead_window_size, lookahead_ngram_size and "
            "lookahead_verification_set_size as the engine was built for, and adopt again",
        )
    try:
        w, n, g = (int(params[k]) for k in LOOKAHEAD_PARAMETERS[1:])
    except ValueError:
        raise _refuse(
            model_dir.name,
            f"lookahead parameters {[params[k] for k in LOOKAHEAD_PARAMETERS[1:]]} are "
            "not integers",
            model_dir,
            "numbers for W, N and G",
        ) from None
    if lookahead_draft_len(w, n, g) != draft:
        raise _refuse(
            model_dir.name,
            f"lookahead (W, N, G) = ({w}, {n}, {g}) needs max_draft_len "
            f"{lookahead_draft_len(w, n, g)}, the engine ({where}) was built with {draft}",
            model_dir,
            "fill the (W, N, G) the engine was built for, or rebuild the engine",
        )
    return {"mode": "lookahead", "window_size": w, "ngram_size": n, "verification_set_size": g}


def adopt_group(mc, model_dir: Path, out: Path) -> tuple[dict, int]:
    """(the LLM recipe, named after the group's ensemble, and its version) for the tensorrt_llm
    model at model_dir; the engine is copied to out/<name>/engine (`build --engine <name>=...`), the
    checkpoint the tokenizer_dir names (the Hugging Face directory the engine was built from) to
    out/<name>/checkpoint."""
    group = group_of(model_dir)
    if "ensemble" not in group:
        raise _refuse(
            model_dir.name,
            "no ensemble calls it as preprocessing → tensorrt_llm → postprocessing: "
            "the recipe is the whole group",
            model_dir,
        )
    name = group["ensemble"]
    engine_dir, engine = _engine(mc, model_dir)
    versions = sorted(
        int(d.name) for d in model_dir.iterdir() if d.is_dir() and d.name.isdigit() and int(d.name)
    )
    recipe = {
        "name": name,
        "version": versions[-1] if versions else 1,
        "backend": "tensorrtllm",
        "runtime": "engine",
    }
    for section, values in _engine_keys(engine).items():
        recipe[section] = (
            values if not isinstance(values, dict) else {**recipe.get(section, {}), **values}
        )
    if (speculative := _speculative(mc, model_dir, engine_dir, engine)) is not None:
        # trtllm-build added max_draft_len to the recipe's max_seq_len; max_num_tokens: as
        # recorded (draft_limits)
        recipe["speculative"] = speculative
        recipe["engine"]["max_seq_len"] -= _engine_mode(engine)[1]
    _serving(mc, model_dir, recipe)
    tokenizer = _python_models(model_dir.parent, group, recipe) or _params(mc).get("tokenizer_dir")
    if not tokenizer or not (Path(tokenizer) / "config.json").is_file():
        raise _refuse(
            group.get("preprocessing", model_dir.name),
            f"tokenizer_dir {tokenizer!r} is not a Hugging "
            "Face checkpoint directory here (config.json): the recipe packages the tokenizer and "
            "reads the model's config from it",
            model_dir.parent / group.get("preprocessing", ""),
            "point tokenizer_dir at the checkpoint the engine was built from, and adopt again",
        )
    shutil.copytree(engine_dir, out / name / "engine", dirs_exist_ok=True)
    shutil.copytree(tokenizer, out / name / "checkpoint", dirs_exist_ok=True)
    recipe["checkpoint"] = {"path": f"{name}/checkpoint"}
    recipe["verify"] = {"goldens": f"goldens/{name}.npz"}
    return recipe, recipe["version"]
