"""A toy backend, registered only by the tests that use it: `backend: affine` turns a JSON file of
coefficients ({"scale": s, "bias": b}) into a Python-backend model computing y = x * scale + bias.

It is the whole of what a new backend takes: this module, one contract subclass
(tests/unit/backends/test_contract.py) and one registration (REGISTRY.register / REGISTRY.registered)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from tritonbuild.backends.base import Backend, StepContext
from tritonbuild.backends.common import local_source, pinned_digest
from tritonbuild.recipe.models import Recipe

MODEL_PY = """import numpy as np
import triton_python_backend_utils as pb_utils

SCALE = np.float32({scale!r})
BIAS = np.float32({bias!r})


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", (x * SCALE + BIAS).astype(np.float32))]))
        return out
"""


class AffineRecipe(Recipe):
    backend: Literal["affine"]


class AffineBackend(Backend):
    name = "affine"
    recipe_type = AffineRecipe
    step_toolchain = {"affine.render": ("tritonbuild",)}
    triton_backend = "python"
    model_files = None  # the python backend's load rule applies
    route = "live-embedded"

    def check_recipe(self, recipe) -> list[tuple]:
        if [t.name for t in recipe.inputs] != ["X"] or [t.name for t in recipe.outputs] != ["Y"]:
            return [
                (
                    ("inputs",),
                    "an affine model has one input X and one output Y",
                    "name them X and Y",
                )
            ]
        return []

    def plan_steps(self, loaded, ctx) -> list:
        coefficients = local_source(loaded, loaded.recipe.source.path, ("source", "path"))
        return [
            (
                "affine.render",
                {"template": 1},
                {str(coefficients): pinned_digest(loaded, coefficients, ctx)},
            )
        ]

    def run_step(self, ctx: StepContext) -> None:
        ((path, _digest),) = ctx.inputs.items()
        coefficients = json.loads(Path(path).read_text())
        ctx.out.mkdir(parents=True, exist_ok=True)
        (ctx.out / "model.py").write_text(
            MODEL_PY.format(scale=float(coefficients["scale"]), bias=float(coefficients["bias"]))
        )

    def derive_io(self, recipe, files, recipe_dir):
        return list(recipe.inputs), list(recipe.outputs)

    def default_filename(self, recipe) -> str:
        return "model.py"

    def configure(self, mc, recipe) -> None:
        mc.backend = "python"


RECIPE = """
name: affine-demo
version: 1
backend: affine
source: {path: coefficients.json}
max_batch_size: 4
inputs: [{name: X, dtype: fp32, dims: [3]}]
outputs: [{name: Y, dtype: fp32, dims: [3]}]
verify: {goldens: goldens/affine-demo.npz, repeats: 2, samples: 3, batch_invariance: require}
"""


def write_recipe(directory: Path, scale: float = 2.0, bias: float = 0.5) -> Path:
    """The toy recipe and its coefficients in directory; returns the recipe's path."""
    (directory / "coefficients.json").write_text(json.dumps({"scale": scale, "bias": bias}))
    (directory / "affine-demo.yaml").write_text(RECIPE.lstrip())
    return directory / "affine-demo.yaml"
