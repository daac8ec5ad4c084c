"""make_plan: each backend module names its steps; the planner keys them by content."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.backends import REGISTRY
from tritonbuild.backends.base import PlanContext
from tritonbuild.backends.common import local_source
from tritonbuild.core.hashing import file_hashes, sha256_json
from tritonbuild.core.paths import PathProblem, display_path
from tritonbuild.core.toolchain import for_step
from tritonbuild.errors import PlanError
from tritonbuild.plan.models import ModelPlan, Plan, PlannedStep
from tritonbuild.recipe.load import LoadedRecipe


def key_material(
    kind: str, params: dict, inputs: dict[str, str], toolchain: dict[str, str]
) -> dict:
    """What a step's output depends on: kind, params, input digests, its part of the toolchain (not
    paths)."""
    return {
        "kind": kind,
        "params": params,
        "inputs": sorted(inputs.values()),
        "toolchain": for_step(REGISTRY.step_toolchain(kind), toolchain),
    }


def cache_key(kind: str, params: dict, inputs: dict[str, str], toolchain: dict[str, str]) -> str:
    """sha256 of canonical JSON of the key material."""
    return sha256_json(key_material(kind, params, inputs, toolchain))


def make_plan(
    recipes: list[LoadedRecipe], cache_dir: Path, python: tuple[str, str] | None = None
) -> Plan:
    """Each recipe's steps keyed by content; cache_dir holds the input digest cache and downloaded
    checkpoints; python: (interpreter, minor) that checks Python files' syntax (the target
    image's), None for this one."""
    ctx = PlanContext(cache_dir=Path(cache_dir), hashes=file_hashes(cache_dir), python=python)
    toolchain = REGISTRY.toolchain()
    models = []
    for loaded in recipes:
        backend = REGISTRY.get(loaded.recipe.backend)
        try:
            for output, rel in getattr(loaded.recipe, "labels", {}).items():
                local_source(loaded, rel, ("labels", output))  # build places it (assemble)
            planned = list(backend.plan_steps(loaded, ctx))
        except (
            PathProblem
        ) as e:  # an input that is a FIFO, a device, a symlink loop or leaves its root
            raise PlanError(
                str(e),
                where=str(loaded.path),
                hint="inputs must be regular files (or symlinks to them "
                "inside the input's directory)",
            ) from None
        steps = [
            PlannedStep(
                kind=kind,
                params=params,
                inputs=inputs,
                timeout_s=backend.step_timeout(loaded.recipe, kind),
                cache_key=cache_key(kind, params, inputs, toolchain),
            )
            for kind, params, inputs in planned
        ]
        extras = backend.describe(loaded, ctx)
        models.append(
            ModelPlan(
                name=loaded.recipe.name,
                version=loaded.recipe.version,
                backend=loaded.recipe.backend,
                recipe_path=display_path(loaded.path),
                recipe_dir=str(loaded.base_dir.resolve()),
                recipe_digest=loaded.digest,
                recipe=loaded.recipe,
                steps=steps,
                extras=extras,
            )
        )
    ctx.hashes.save()
    return Plan(toolchain=toolchain, models=models)
