"""What build_repository checks around the build: the inputs an OUT must not replace or overlap
(before planning: the recipes' own files; after: every planned step's input) and a declared
verify.goldens that does not exist yet (a warning at build, not a surprise at verify)."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.core.stores import is_url
from tritonbuild.plan import Plan
from tritonbuild.recipe.load import LoadedRecipe
from tritonbuild.steps import BuildResult


def recipe_inputs(
    loaded: list[LoadedRecipe], cache: Path
) -> tuple[dict[Path, str], dict[Path, str]]:
    """What an OUT must not replace: (paths it must not be or hold, trees it must not overlap
    either way)."""
    held: dict[Path, str] = {}
    around: dict[Path, str] = {cache: "the build cache"}
    for loaded_recipe in loaded:
        recipe, base = loaded_recipe.recipe, loaded_recipe.base_dir
        held[loaded_recipe.path] = "the recipe"
        held[base] = "the recipe directory"
        goldens = getattr(getattr(recipe, "verify", None), "goldens", None)
        if goldens:
            held[base / goldens] = f"the goldens of {recipe.name!r}"
        for rel in _source_paths(recipe):
            if not is_url(rel):
                held[base / rel] = f"a source of {recipe.name!r}"
        for key in ("checkpoint", "tokenizer"):
            value = getattr(recipe, key, None)
            rel = getattr(value, "path", value)
            if isinstance(rel, str) and not is_url(rel):
                around[base / rel] = f"the {key} of {recipe.name!r}"
    return held, around


def _source_paths(recipe) -> list[str]:
    """The recipe's source file and source files, as written in it."""
    source = getattr(recipe, "source", None)
    single = [source.path] if getattr(source, "path", None) else []
    return single + list(getattr(source, "files", []))


def planned_inputs(the_plan: Plan) -> dict[Path, str]:
    """Every local input of a planned step (a URL is nobody's OUT)."""
    return {
        Path(path): f"an input of model {model_plan.name!r}"
        for model_plan in the_plan.models
        for step in model_plan.steps
        for path in step.inputs
        if not is_url(path)
    }


def warn_missing_goldens(result: BuildResult, out: Path) -> BuildResult:
    """A declared verify.goldens that does not exist yet: said at build, not discovered at
    verify."""
    missing = [
        f"{built.plan.name}: verify.goldens {built.plan.recipe.verify.goldens} does not exist "
        f"(declared in {built.plan.recipe_path}); record it with 'tritonbuild verify {out} "
        "--record' and commit it"
        for built in result.models
        if getattr(built.plan.recipe, "verify", None) is not None
        and built.plan.recipe.verify.goldens
        and not (Path(built.plan.recipe_dir) / built.plan.recipe.verify.goldens).is_file()
    ]
    if not missing:
        return result
    return result.model_copy(update={"warnings": [*result.warnings, *missing]})
