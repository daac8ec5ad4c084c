"""vLLM speculative decoding: the recipe's speculative key as model.json's speculative_config
(AsyncEngineArgs takes a dict of SpeculativeConfig's fields: method, model, num_speculative_tokens),
the draft model or head packaged as <v>/draft/ and named where the server sees it, its weights and
its attention layers' KV counted in the memory plan. Per vLLM version an image ships
(versions.py `speculative`, from the wheels' SpeculativeConfig: the package's
facts/vllm_speculative.json): the methods it takes and whether its engine runs
method draft_model; which methods load a drafter whose attention layers get KV (the same
file's drafter_kv, from each wheel's V1 GPU model runner and proposers)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tritonbuild.backends.common import draft_checkpoint_dir, tree_inputs
from tritonbuild.core import facts
from tritonbuild.recipe.models import Strict

DRAFT_DIR = "draft"
METHODS = ("draft_model", "eagle", "eagle3", "medusa")


def with_draft_kv() -> frozenset[str]:
    """The methods (of METHODS) whose drafter is a model with attention layers that join the
    target's in the KV cache spec, in any recorded vLLM (facts/vllm_speculative.json drafter_kv:
    draft_model, eagle, eagle3; Medusa's heads have none)."""
    versions = facts.load("vllm_speculative")["versions"].values()
    return frozenset(
        method
        for version in versions
        for method in version.get("drafter_kv", {}).get("methods", [])
        if method in METHODS
    )


class VLLMSpeculative(Strict):
    method: Literal[METHODS] = Field(
        description="SpeculativeConfig.method: a draft model, an EAGLE / EAGLE-3 head or Medusa "
        "heads."
    )
    num_speculative_tokens: int = Field(ge=1, le=64, description="Tokens proposed per step.")
    model: str = Field(
        description="The draft model's (or heads') checkpoint directory, relative to the recipe; "
        "content-hashed, packaged as <v>/draft/."
    )


def speculative_config(recipe) -> dict | None:
    s = recipe.speculative
    if s is None:
        return None
    return {
        "method": s.method,
        "num_speculative_tokens": s.num_speculative_tokens,
        "model": f"{recipe.serving.repository_mount}/{recipe.name}/{recipe.version}/{DRAFT_DIR}",
    }


def draft_dir(loaded, recipe_dir):
    """The recipe's draft checkpoint directory (it must hold config.json), or None without
    speculative."""
    if loaded.recipe.speculative is None:
        return None
    return draft_checkpoint_dir(
        loaded, recipe_dir, ("speculative", "model"), "vLLM loads the draft"
    )


def draft_step(loaded, ctx, recipe_dir) -> list[tuple[str, dict, dict[str, str]]]:
    d = draft_dir(loaded, recipe_dir)
    if d is None:
        return []
    files, inputs = tree_inputs(d, ctx)
    return [("vllm.draft", {"files": sorted(files)}, inputs)]


def speculative_problem(speculative, triton_image: str) -> tuple[str, str] | None:
    """(message, hint) when the image's vLLM takes no such speculative method, or refuses (or is not
    recorded to run) method draft_model; else None. An image whose vLLM has no speculative_config
    (or is not recorded) is engine_args_problems' (the key itself)."""
    from tritonbuild.backends.vllm.versions import SPECULATIVE, image_vllm, images_where

    version = image_vllm(triton_image)
    if speculative is None or version not in SPECULATIVE:
        return None
    method, spec = speculative.method, SPECULATIVE[version]
    ours = [name for name in spec["methods"] if name in METHODS]
    if method not in spec["methods"]:
        return (
            f"{triton_image} ships vLLM {version}, whose SpeculativeConfig takes no method "
            f"{method!r} (it takes {', '.join(ours)} of tritonbuild's)",
            f"use an image whose vLLM takes it, newest first: "
            f"{images_where(lambda v: v in SPECULATIVE and method in SPECULATIVE[v]['methods'])}",
        )
    if method != "draft_model" or spec["draft_model_runs"]:
        return None
    what = (
        "whose engine refuses method draft_model (EngineArgs raises NotImplementedError)"
        if spec["draft_model_runs"] is False
        else "and whether its engine runs method draft_model is not recorded (no "
        "NotImplementedError for it, no V1 draft-model proposer: the V0 fallback is not checked)"
    )
    runs = images_where(lambda v: v in SPECULATIVE and SPECULATIVE[v]["draft_model_runs"] is True)
    others = [name for name in ours if name != "draft_model"]
    return (
        f"{triton_image} ships vLLM {version}, {what}",
        f"use {' or '.join(others) or 'another method'}, or an image whose vLLM runs it, newest "
        f"first: {runs}",
    )


def draft_kv_config(loaded, d) -> dict | None:
    """The drafter's config.json (d: draft_dir's answer) when its attention layers get KV blocks
    beside the target's, else None."""
    if d is None or loaded.recipe.speculative.method not in with_draft_kv():
        return None
    import json

    return json.loads((d / "config.json").read_text())
