"""LoRA in a TensorRT engine (runtime: engine): trtllm-build's LoRA plugin and what configures it,
the target modules (--lora_target_modules) or a Hugging Face PEFT adapter (--lora_dir, the first of
which configures the modules and rank), and the rank the plugin's workspace is sized for
(--max_lora_rank). The served adapters themselves are TensorRT-LLM's converted .npy pairs (the
trtllm.lora step); the engine only needs the plugin."""

from __future__ import annotations

import typing

from tritonbuild.backends.common import split_tree, tree_inputs
from tritonbuild.backends.tensorrtllm.recipe.lora import LoraModule
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
from tritonbuild.errors import PlanError

MAX_LORA_RANK = 64  # trtllm-build --max_lora_rank's default (tensorrt_llm/commands/build.py)


def lora_build_params(loaded, ctx, recipe_dir) -> tuple[dict, dict[str, str]]:
    """(the trtllm.engine step's 'lora' params, the build adapter's files as step inputs); ({}, {})
    without lora. recipe_dir(loaded, rel, key) resolves the recipe's adapter directory."""
    r: LLMRecipe = loaded.recipe
    if r.lora is None:
        return {}, {}
    params: dict = {
        "target_modules": list(r.lora.target_modules or []),
        "max_lora_rank": r.lora.max_lora_rank or MAX_LORA_RANK,
        "adapter": {},
    }
    if r.lora.build_adapter is None:
        if not params["target_modules"]:
            params["target_modules"] = _adapters_modules(
                loaded, recipe_dir, params["max_lora_rank"]
            )
        return params, {}
    d = recipe_dir(loaded, r.lora.build_adapter, ("lora", "build_adapter"))
    if not (d / "adapter_config.json").is_file():
        raise PlanError(
            f"lora.build_adapter {d} has no adapter_config.json: trtllm-build --lora_dir reads a "
            "Hugging Face PEFT adapter (lora_ckpt_source hf)",
            where=loaded.where(("lora", "build_adapter")),
            hint="point it at the PEFT directory the .npy adapters were converted from, or set "
            "lora.target_modules instead",
        )
    params["adapter"], inputs = tree_inputs(d, ctx)
    return params, inputs


def _adapters_modules(loaded, recipe_dir, max_rank: int) -> list[str]:
    """The modules the recipe's converted adapters adapt: model.lora_config.npy rows are [module id,
    layer, adapter size] (LoraManager.LORA_MODULE_IDS numbering); a rank above max_rank is a plan
    error."""
    import numpy as np

    modules = typing.get_args(LoraModule)
    ids: set[int] = set()
    for name, rel in loaded.recipe.lora.adapters.items():
        where = loaded.where(("lora", "adapters", name))
        f = recipe_dir(loaded, rel, ("lora", "adapters", name)) / "model.lora_config.npy"
        try:
            rows = np.load(f, allow_pickle=False).reshape(-1, 3)
        except (OSError, ValueError) as e:
            raise PlanError(
                f"LoRA adapter {name!r}: {f} is not TensorRT-LLM's lora config array ({e})",
                where=where,
                hint="convert the adapter with TensorRT-LLM's hf_lora_convert.py, or "
                "set lora.target_modules",
            ) from None
        bad = sorted({int(module) for module in rows[:, 0]} - set(range(len(modules))))
        if bad or (rows.size and int(rows[:, 2].max()) > max_rank):
            raise PlanError(
                f"LoRA adapter {name!r}: module ids {bad} unknown"
                if bad
                else f"LoRA adapter {name!r} has rank {int(rows[:, 2].max())}, above max_lora_rank "
                f"{max_rank}",
                where=where,
                hint="set lora.target_modules / lora.max_lora_rank to what it needs",
            )
        ids |= {int(module) for module in rows[:, 0]}
    return [modules[i] for i in sorted(ids)]


def split_adapter(params: dict, inputs: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """(the other inputs, the build adapter's directory) of a trtllm.engine step."""
    return split_tree((params.get("lora") or {}).get("adapter") or {}, inputs)


def lora_build_argv(lora: dict | None, adapter_dir: str | None) -> list[str]:
    """trtllm-build's LoRA arguments: the plugin, the rank, then the modules (given) or the adapter
    (read)."""
    if not lora:
        return []
    argv = ["--lora_plugin", "auto", "--max_lora_rank", str(lora["max_lora_rank"])]
    if adapter_dir is not None:
        argv += ["--lora_dir", adapter_dir, "--lora_ckpt_source", "hf"]
    if lora["target_modules"]:
        argv += ["--lora_target_modules", *lora["target_modules"]]
    return argv
