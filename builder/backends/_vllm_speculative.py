"""vLLM speculative decoding: the recipe's speculative key as model.json's speculative_config (AsyncEngineArgs
takes a dict of SpeculativeConfig's fields: method, model, num_speculative_tokens), the draft model or head packaged
as <v>/draft/ and named where the server sees it, its weights counted in the memory plan."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tritonbuild.core.hashing import tree_files
from tritonbuild.errors import PlanError
from tritonbuild.recipe.models import Strict

DRAFT_DIR = "draft"


class VLLMSpeculative(Strict):
    method: Literal["draft_model", "eagle", "eagle3", "medusa"] = Field(
        description="SpeculativeConfig.method: a draft model, an EAGLE / EAGLE-3 head or Medusa heads.")
    num_speculative_tokens: int = Field(ge=1, le=64, description="Tokens proposed per step.")
    model: str = Field(description="The draft model's (or heads') checkpoint directory, relative to the recipe; "
                                   "content-hashed, packaged as <v>/draft/.")


def speculative_config(recipe) -> dict | None:
    s = recipe.speculative
    if s is None:
        return None
    return {"method": s.method, "num_speculative_tokens": s.num_speculative_tokens,
            "model": f"{recipe.serving.repository_mount}/{recipe.name}/{recipe.version}/{DRAFT_DIR}"}


def draft_dir(loaded, recipe_dir):
    """The recipe's draft checkpoint directory (it must hold config.json), or None without speculative."""
    if loaded.recipe.speculative is None:
        return None
    d = recipe_dir(loaded, loaded.recipe.speculative.model, ("speculative", "model"))
    if not (d / "config.json").is_file():
        raise PlanError(f"speculative.model {d} has no config.json: vLLM loads the draft as a Hugging Face "
                        "checkpoint", where=loaded.where(("speculative", "model")),
                        hint="point it at the draft checkpoint directory (save_pretrained)")
    return d


def draft_step(loaded, ctx, recipe_dir) -> list[tuple[str, dict, dict[str, str]]]:
    d = draft_dir(loaded, recipe_dir)
    if d is None:
        return []
    files = {f.as_posix(): ctx.digest(d / f) for f in tree_files(d)}
    return [("vllm.draft", {"files": sorted(files)}, {str(d / rel): digest for rel, digest in files.items()})]
