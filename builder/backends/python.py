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
    _check_syntax([Path(path) for path in inputs], ctx)
    return [("python.package", {"layout": layout}, inputs)]


def run_step(ctx: StepContext) -> None:
    by_digest = {d: Path(p) for p, d in ctx.inputs.items()}
    for dest, digest in ctx.params["layout"].items():
        target = ctx.out / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(by_digest[digest], target)


# Run by the target image's Python (build --triton-image): each file compiled, nothing written; the
# first SyntaxError printed as JSON [path, line, offset, message], exit 3.
_COMPILE = (
    "import json, sys\n"
    "for p in sys.argv[1:]:\n"
    "    try:\n"
    "        compile(open(p, 'rb').read(), p, 'exec', dont_inherit=True)\n"
    "    except SyntaxError as e:\n"
    "        print(json.dumps([p, e.lineno, e.offset, e.msg])); sys.exit(3)\n"
    "    except ValueError as e:\n"
    "        print(json.dumps([p, None, None, str(e)])); sys.exit(3)\n"
)


def _check_syntax(files: list[Path], ctx: PlanContext) -> None:
    """A Python file the stub would fail to import (a syntax error) stops the build at planning, at
    its file:line, instead of surfacing as a load error at verify: compiled by the target image's
    Python (ctx.python: build --triton-image), else by the Python running the build."""
    import sys

    py = [path for path in files if path.suffix == ".py"]
    if not py:
        return
    if ctx.python is None:
        minor, by = f"{sys.version_info.major}.{sys.version_info.minor}", None
        found = _compile_here(py)
    else:
        (interpreter, minor), by = ctx.python, "the target image's (--triton-image)"
        found = _compile_with(interpreter, py)
    if found is None:
        return
    path, line, offset, msg = found
    where = (f"{path}:{line}" if line else str(path)) + (f":{offset}" if line and offset else "")
    raise BuildError(
        f"{where}: SyntaxError: {msg}",
        where=where,
        hint=f"fix the syntax (checked with Python {minor}, "
        + (
            f"{by})"
            if by
            else "this build's interpreter; --triton-image checks with the Python "
            "of the image you serve with)"
        ),
    )


def _compile_here(files: list[Path]) -> tuple | None:
    for path in files:
        try:
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
        except SyntaxError as e:
            return str(path), e.lineno, e.offset, e.msg
        except ValueError as e:  # NUL bytes, before Python 3.12 (a SyntaxError since)
            return str(path), None, None, str(e)
    return None


def _compile_with(interpreter: str, files: list[Path]) -> tuple | None:
    import json
    import subprocess

    try:
        done = subprocess.run(
            [interpreter, "-I", "-c", _COMPILE, *map(str, files)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError(
            f"cannot check the Python files' syntax with {interpreter}: {e}",
            hint="check that interpreter, or build without --triton-image",
        ) from None
    if done.returncode == 3:
        return tuple(json.loads(done.stdout.strip().splitlines()[-1]))
    if done.returncode != 0:
        raise BuildError(
            f"cannot check the Python files' syntax with {interpreter}: exited with "
            f"{done.returncode}: {done.stderr.strip()[-300:]}",
            hint="check that interpreter, or build without --triton-image",
        )
    return None


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
