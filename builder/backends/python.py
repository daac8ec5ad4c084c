"""Python backend: the user's model.py (and the files it names) packaged into <name>/<version>/."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Literal

from pydantic import Field

from tritonbuild.backends.base import Backend, PlanContext, StepContext
from tritonbuild.backends.common import local_source, pinned_digest, relative_dest
from tritonbuild.core.stores import is_url
from tritonbuild.errors import BuildError, PlanError
from tritonbuild.recipe.buckets import Buckets, buckets_field
from tritonbuild.recipe.load import LoadedRecipe
from tritonbuild.recipe.models import FileSource, Recipe, TensorSpec

NAME = "python"
DEFAULT_FILENAME = "model.py"
# batch_buckets: the generated wrapper is model.py and the recipe's model.py is packaged beside it
BUCKETED_MODEL = Path(__file__).parent / "models" / "bucketed.py"
USER_FILENAME = "user_model.py"
BUCKETS_PARAMETER = "tritonbuild_batch_buckets"


class PythonSource(FileSource):
    path: str = Field(description="model.py (relative to the recipe).")
    files: list[str] = Field(
        default_factory=list,
        description="Extra files (relative to the recipe) copied next to model.py.",
    )


class PythonRecipe(Recipe):
    """A Python-backend model: model.py (and the files it reads) from the recipe's source."""

    backend: Literal["python"]
    source: PythonSource
    batch_buckets: Buckets = buckets_field()


def plan_steps(loaded: LoadedRecipe, ctx: PlanContext) -> list[tuple[str, dict, dict[str, str]]]:
    src = loaded.recipe.source
    if is_url(src.path):
        raise PlanError(
            "python models take a local model.py as source.path",
            where=loaded.where(("source",)),
            hint="point source.path at model.py next to the recipe",
        )
    model_py = local_source(loaded, src.path, ("source", "path"))
    layout = {DEFAULT_FILENAME: pinned_digest(loaded, model_py, ctx)}
    inputs = {str(model_py): layout[DEFAULT_FILENAME]}
    if loaded.recipe.batch_buckets:
        # the wrapper pads each batch to its bucket, then runs the recipe's model.py
        layout = {
            USER_FILENAME: layout[DEFAULT_FILENAME],
            DEFAULT_FILENAME: ctx.digest(BUCKETED_MODEL),
        }
        inputs[str(BUCKETED_MODEL)] = layout[DEFAULT_FILENAME]
    for i, rel in enumerate(src.files):
        path = local_source(loaded, rel, ("source", "files", i))
        dest = relative_dest(loaded, path, model_py.parent, ("source", "files", i))
        if dest in layout:
            loc = ("source", "files", i)
            raise PlanError(
                f"{loaded.key(loc)}: {rel!r} is packaged twice",
                where=loaded.where(loc),
                hint="list each file once",
            )
        layout[dest] = ctx.digest(path)
        inputs[str(path)] = layout[dest]
    return [("python.package", {"layout": layout}, inputs)]


def run_step(ctx: StepContext) -> None:
    by_digest = {d: Path(p) for p, d in ctx.inputs.items()}
    for dest, digest in ctx.params["layout"].items():
        if dest.endswith(".py"):
            _compiles(by_digest[digest])
        target = ctx.out / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(by_digest[digest], target)


def _compiles(path: Path) -> None:
    """A Python file the stub would fail to import (a syntax error) stops the build, at its
    file:line, instead of surfacing as a load error at verify. Compiled by the Python running the
    build; nothing is written."""
    import sys

    try:
        compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    except SyntaxError as e:
        where = f"{path}:{e.lineno}" + (f":{e.offset}" if e.offset else "")
        raise BuildError(
            f"{where}: SyntaxError: {e.msg}",
            where=where,
            hint=f"fix the syntax (checked with Python {sys.version_info.major}."
            f"{sys.version_info.minor}, this build's interpreter)",
        ) from None


def derive_io(
    recipe: Recipe, files: dict[str, Path], recipe_dir=None
) -> tuple[list[TensorSpec], list[TensorSpec]]:
    return list(recipe.inputs or []), list(recipe.outputs or [])


def configure(mc, recipe: Recipe) -> None:
    mc.backend = "python"
    if recipe.batch_buckets:
        mc.parameters[BUCKETS_PARAMETER].string_value = ",".join(
            str(size) for size in recipe.batch_buckets
        )


def check_recipe(recipe: Recipe) -> list[tuple]:
    """A model.py, and its tensors declared: there is no graph to derive them from."""
    out = []
    if recipe.batch_buckets and BUCKETS_PARAMETER in recipe.parameters:
        out.append(
            (
                ("parameters", BUCKETS_PARAMETER),
                f"parameter {BUCKETS_PARAMETER} is written from batch_buckets",
                "remove it from parameters",
            )
        )
    for key in ("inputs", "outputs"):
        if not getattr(recipe, key):
            out.append(
                (
                    (key,),
                    f"python models must declare '{key}' (nothing to derive them from)",
                    f"add '{key}:' with name, dtype and dims",
                )
            )
    return out


class PythonBackend(Backend):
    name = NAME
    recipe_type = PythonRecipe
    step_toolchain = {"python.package": ("tritonbuild",)}
    triton_backend = "python"
    model_files = {"": DEFAULT_FILENAME}
    route = "live-embedded"  # the embedded tritonserver has this backend

    plan_steps = staticmethod(plan_steps)
    run_step = staticmethod(run_step)
    derive_io = staticmethod(derive_io)
    configure = staticmethod(configure)
    check_recipe = staticmethod(check_recipe)


BACKEND = PythonBackend()
