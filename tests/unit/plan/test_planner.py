"""The plan: step inputs are absolute paths, however the recipes were named (a step reads only its context,
so a relative input would make it depend on the working directory it runs in)."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.backends import REGISTRY
from tritonbuild.plan import make_plan
from tritonbuild.recipe import load_recipes


def test_step_inputs_are_absolute_when_recipes_are_named_relatively(in_root, tmp_path):
    plan = make_plan(
        load_recipes(
            [
                Path("recipes/examples/risk-scorer.yaml"),
                Path("recipes/examples/image-embedder.yaml"),
            ],
            REGISTRY.recipe_kinds(),
        ),
        tmp_path / "cache",
    )
    inputs = [p for m in plan.models for s in m.steps for p in s.inputs]
    assert len(inputs) >= 3
    assert all(Path(p).is_absolute() for p in inputs), inputs
