"""Two toy backends with load rules of their own, registered only by the tests that use them:

- `toy` writes models of the Triton backend `toyrt` (platform `toy_graph` for a platform-only config), default
  file model.toy, which must start with the bytes TOY (model_file_checks) and is opened only by verify
  (model_content_checks);
- `toy-py` also writes Python models (also_writes), marked by a toy.json beside model.py, which must be JSON.

They build nothing: the tests write their model directories by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from tritonbuild.backends.base import Backend, StepContext
from tritonbuild.recipe.models import Recipe

HEADER = b"TOY"


class ToyRecipe(Recipe):
    backend: Literal["toy"]


class ToyPythonRecipe(Recipe):
    backend: Literal["toy-py"]


class _NoBuild(Backend):
    route = "none"

    def plan_steps(self, loaded, ctx) -> list:
        return []

    def run_step(self, ctx: StepContext) -> None:
        raise AssertionError("the toy backends build nothing")

    def derive_io(self, recipe, files, recipe_dir):
        return list(recipe.inputs), list(recipe.outputs)


class ToyBackend(_NoBuild):
    name = "toy"
    recipe_type = ToyRecipe
    step_toolchain = {"toy.copy": ("tritonbuild",)}
    triton_backend = "toyrt"
    model_files = {"": "model.toy", "toy_graph": "model.toy"}

    def model_file_checks(
        self, mc, model_dir: Path, versions: list[int]
    ) -> list[tuple[str, list[str], str]]:
        rows = super().model_file_checks(
            mc, model_dir, versions
        )  # Triton's presence rule from model_files
        files = [model_dir / str(v) / "model.toy" for v in versions]
        bad = [
            f"{f.parent.name}/{f.name} does not start with {HEADER!r}"
            for f in files
            if f.is_file() and not f.read_bytes().startswith(HEADER)
        ]
        return [*rows, ("toy.header", bad, f"every model.toy starts with {HEADER!r}")]

    def model_content_checks(
        self, mc, model_dir: Path, versions: list[int]
    ) -> list[tuple[str, list[str], str]]:
        opened = [
            f"{v}/model.toy" for v in versions if (model_dir / str(v) / "model.toy").is_file()
        ]
        return [("toy.graph", [], f"opened {', '.join(opened)}")]


class ToyPythonBackend(_NoBuild):
    name = "toy-py"
    recipe_type = ToyPythonRecipe
    step_toolchain = {"toy-py.copy": ("tritonbuild",)}
    triton_backend = "python"
    also_writes = ("python",)

    def model_file_checks(
        self, mc, model_dir: Path, versions: list[int]
    ) -> list[tuple[str, list[str], str]]:
        marked = [
            model_dir / str(v) / "toy.json"
            for v in versions
            if (model_dir / str(v) / "toy.json").is_file()
        ]
        if not marked:
            return []  # a Python model that is not ours
        bad = []
        for f in marked:
            try:
                json.loads(f.read_text())
            except ValueError as e:
                bad.append(f"{f.parent.name}/toy.json is not JSON: {e}")
        return [("toy-py", bad, "toy.json parses")]


IO = (
    'max_batch_size: 4\ninput { name: "X" data_type: TYPE_FP32 dims: [3] }\n'
    'output { name: "Y" data_type: TYPE_FP32 dims: [3] }\ninstance_group { kind: KIND_CPU count: 1 }\n'
)


def write_model(root: Path, name: str, head: str, files: dict[str, bytes]) -> Path:
    """A hand-written model directory: config.pbtxt (head + IO) and version 1's files."""
    d = root / name
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_text(f'name: "{name}"\n{head}\n{IO}')
    for rel, data in files.items():
        (d / "1" / rel).write_bytes(data)
    return d
