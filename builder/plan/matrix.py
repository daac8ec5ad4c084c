"""The CI matrix of a plan (`plan --matrix`): one entry per recipe with a step missing from the
local (and remote) build cache, with the runner it needs (a GPU for an engine step or a GPU
target)."""

from __future__ import annotations

from dataclasses import dataclass

from tritonbuild.backends import REGISTRY
from tritonbuild.core.results import Result
from tritonbuild.plan.models import Plan


@dataclass(frozen=True)
class MatrixEntry(Result):
    recipe: str
    model: str
    backend: str
    gpu: str  # the GPU the recipe asks for, "gpu" for any, "cpu" for none
    runner: str  # "cpu" or "gpu"
    steps: list[str]  # the step kinds missing from the cache


def matrix_entries(plan: Plan, cached, only: set[str] | None = None) -> list[MatrixEntry]:
    """cached(cache_key) -> bool says whether a step's result is in a cache; only: the model names
    to consider."""
    out = []
    for model_plan in plan.models:
        if only is not None and model_plan.name not in only:
            continue
        missing = [step for step in model_plan.steps if not cached(step.cache_key)]
        if not missing:
            continue
        recipe = model_plan.recipe
        gpu = getattr(recipe, "gpu", None) or (
            "gpu"
            if getattr(recipe, "target", "cpu") == "gpu"
            or any(REGISTRY.builds_engine(step.kind) for step in model_plan.steps)
            else "cpu"
        )
        out.append(
            MatrixEntry(
                recipe=model_plan.recipe_path,
                model=model_plan.name,
                backend=model_plan.backend,
                gpu=gpu,
                runner="cpu" if gpu == "cpu" else "gpu",
                steps=[step.kind for step in missing],
            )
        )
    return out
