"""Speculative decoding on the LLM-API route (runtime: pytorch): the LLM API's speculative_config (a draft model,
DraftTarget, or an EAGLE head, Eagle; max_draft_len) in model.yaml, the draft checkpoint packaged beside the
model, and what the draft adds to the GPU memory plan. The engine route's (trtllm-build
--speculative_decoding_mode, the backend's decoding_mode) is not generated; the recipe says so."""

from __future__ import annotations

import json

from tritonbuild.backends.tensorrtllm.recipe import LLMRecipe
from tritonbuild.core.hashing import tree_files
from tritonbuild.errors import PlanError, RecipeError

# recipe mode → the LLM API's decoding_type (DecodingBaseConfig.from_dict, tests/contracts/facts/llm_args.json)
DECODING_TYPES = {"draft_target": "DraftTarget", "eagle": "Eagle"}
DRAFT_DIR = "draft"  # where the draft checkpoint lives in the LLM-API model's version directory


def speculative_config(r: LLMRecipe) -> dict | None:
    """model.yaml's speculative_config; speculative_model_dir relative to the version directory."""
    s = r.speculative
    if s is None:
        return None
    return {"decoding_type": DECODING_TYPES[s.mode], "max_draft_len": s.max_draft_len,
            "speculative_model_dir": DRAFT_DIR}


def engine_route_problem(loaded) -> None:
    """speculative on the engine route: a recipe error naming the route tritonbuild generates it for."""
    if loaded.recipe.speculative is not None:
        raise RecipeError("speculative needs runtime: pytorch (the LLM API's speculative_config); on the engine "
                          "route (trtllm-build --speculative_decoding_mode, the backend's decoding_mode) tritonbuild "
                          "generates none", where=loaded.where(("speculative",)),
                          hint="set runtime: pytorch, or remove speculative")


def _draft_dir(loaded, recipe_dir):
    r: LLMRecipe = loaded.recipe
    d = recipe_dir(loaded, r.speculative.draft_checkpoint, ("speculative", "draft_checkpoint"))
    if not (d / "config.json").is_file():
        raise PlanError(f"speculative.draft_checkpoint {d} has no config.json: the LLM API loads the draft "
                        f"{'model' if r.speculative.mode == 'draft_target' else 'EAGLE head'} as a Hugging Face "
                        "checkpoint", where=loaded.where(("speculative", "draft_checkpoint")),
                        hint="point it at the draft checkpoint directory (save_pretrained)")
    return d


def draft_step(loaded, ctx, recipe_dir) -> list[tuple[str, dict, dict[str, str]]]:
    """The draft checkpoint keyed by content (its path out of the key), packaged as <v>/draft/."""
    if loaded.recipe.speculative is None:
        return []
    d = _draft_dir(loaded, recipe_dir)
    files = {f.as_posix(): ctx.digest(d / f) for f in tree_files(d)}
    return [("trtllm.draft", {"files": sorted(files)}, {str(d / rel): digest for rel, digest in files.items()})]


def draft_config(loaded, recipe_dir) -> dict | None:
    """The draft checkpoint's config.json (for the memory plan), or None without speculative decoding."""
    if loaded.recipe.speculative is None:
        return None
    return json.loads((_draft_dir(loaded, recipe_dir) / "config.json").read_text())
