"""vLLM speculative decoding: the recipe's speculative key as model.json's speculative_config (AsyncEngineArgs
takes a dict of SpeculativeConfig's fields: method, model, num_speculative_tokens), the draft model or head packaged
as <v>/draft/ and named where the server sees it, its weights and its attention layers' KV counted in the memory
plan. Per vLLM version (tests/contracts/facts/vllm_draft.json, read from the wheels; kept equal by a test): whether
the V1 engine runs method draft_model at all, and which methods load a drafter whose attention layers get KV."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tritonbuild.core.hashing import tree_files
from tritonbuild.errors import PlanError
from tritonbuild.recipe.models import Strict

DRAFT_DIR = "draft"
# vLLM versions whose V1 engine runs method draft_model (0.11.1's EngineArgs raises NotImplementedError for it);
# an image whose vLLM is not recorded is taken not to (what every recorded version does)
DRAFT_MODEL_RUNS = frozenset({"0.22.0", "0.22.1", "0.24.0", "0.27.1"})
DRAFT_MODEL_REFUSED = frozenset({"0.11.1"})
# the methods whose drafter is a model with attention layers: they join the target's in the KV cache spec
WITH_DRAFT_KV = frozenset({"draft_model", "eagle", "eagle3"})


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


def speculative_problem(speculative, triton_image: str) -> tuple[str, str] | None:
    """(message, hint) when the image's vLLM cannot run the recipe's speculative method, else None."""
    from tritonbuild.backends._vllm_quantization import image_vllm

    if speculative is None or speculative.method != "draft_model":
        return None
    version = image_vllm(triton_image)
    if version in DRAFT_MODEL_RUNS:
        return None
    what = (f"{triton_image} ships vLLM {version}, whose V1 engine refuses method draft_model (EngineArgs: "
            "'Draft model speculative decoding is not supported yet')" if version in DRAFT_MODEL_REFUSED else
            f"whether the vLLM of {triton_image} ({version or 'not in the image table'}) runs method draft_model "
            "is not recorded (vLLM 0.11.1 refuses it)")
    return what, (f"use eagle, eagle3 or medusa, or an image shipping vLLM {', '.join(sorted(DRAFT_MODEL_RUNS))}")


def draft_kv_config(loaded, recipe_dir) -> dict | None:
    """The drafter's config.json when its attention layers get KV blocks beside the target's, else None."""
    d = draft_dir(loaded, recipe_dir)
    if d is None or loaded.recipe.speculative.method not in WITH_DRAFT_KV:
        return None
    import json

    return json.loads((d / "config.json").read_text())
