"""A recipe's type and backend rules come from its backend (recipe_type, check_recipe, through the registry), not
from recipe/: recipe/ names no backend, and a backend registered only here gets its recipe type and rules at load."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Literal

import pytest

from tests.conftest import PY_RECIPE, ROOT
from tritonbuild.backends import REGISTRY
from tritonbuild.backends.base import Backend
from tritonbuild.backends.python import PythonRecipe
from tritonbuild.backends.tensorrt.backend import TensorRTRecipe
from tritonbuild.errors import MultipleErrors, RecipeError, TritonBuildError
from tritonbuild.recipe.load import load_recipe
from tritonbuild.recipe.models import Recipe
from tritonbuild.recipe.rules import check_rules

RECIPE_DIR = ROOT / "builder" / "recipe"


def _errors(path) -> list[RecipeError]:
    with pytest.raises(TritonBuildError) as info:
        load_recipe(path, REGISTRY.recipe_kinds())
    error = info.value
    return error.errors if isinstance(error, MultipleErrors) else [error]


class RulesRecipe(Recipe):
    backend: Literal["rules-toy"]
    toy: dict[str, int] | None = None


class RulesToyBackend(Backend):
    """Registered only by these tests: one rule of its own and one recipe key of its own."""

    name = "rules-toy"
    recipe_type = RulesRecipe
    step_toolchain = {"rules-toy.none": ("tritonbuild",)}  # noqa: RUF012 - ClassVar in backends/base.py
    triton_backend = "python"
    route = "none"

    def check_recipe(self, recipe) -> list[tuple]:
        if recipe.max_batch_size % 2:
            return [
                (
                    ("max_batch_size",),
                    f"a rules-toy model batches in pairs, not {recipe.max_batch_size}",
                    "use an even max_batch_size",
                )
            ]
        return []

    def plan_steps(self, loaded, ctx) -> list:
        return []

    def run_step(self, ctx) -> None:
        raise AssertionError("no steps")

    def derive_io(self, recipe, files, recipe_dir):
        return list(recipe.inputs), list(recipe.outputs)


TOY_RECIPE = PY_RECIPE.replace("backend: python", "backend: rules-toy").replace(
    "max_batch_size: 4", "max_batch_size: 3"
)


def test_a_registered_backend_brings_its_rule(write):
    path = write("toy.yaml", TOY_RECIPE + "batching: {preferred_batch_sizes: [8]}\n")
    with REGISTRY.registered(RulesToyBackend()):
        errors = _errors(path)
    # the recipe type's generic rules still run (batching first), then the backend's own, at its key's line
    assert [e.message.split(":")[0] for e in errors] == [
        "batching.preferred_batch_sizes[0]",
        "max_batch_size",
    ]
    assert errors[1].message == "max_batch_size: a rules-toy model batches in pairs, not 3"
    assert errors[1].where == f"{path}:5" and errors[1].hint == "use an even max_batch_size"
    with pytest.raises(RecipeError, match="unknown backend 'rules-toy'"):
        load_recipe(
            path, REGISTRY.recipe_kinds()
        )  # unregistered with the with block: the kind and its rule are gone


def test_another_kinds_keys_are_unknown_keys_that_name_their_backend(write):
    python_path = write(
        "py.yaml", PY_RECIPE + "tensorrt: {fp16: true}\naccelerators: {cpu: [{name: openvino}]}\n"
    )
    errors = _errors(python_path)
    assert [(e.message, e.where, e.hint) for e in errors] == [
        (
            "tensorrt: unknown key",
            f"{python_path}:9",
            "'tensorrt' is a key of backend tensorrt recipes, not python: remove it or change the backend",
        ),
        (
            "accelerators: unknown key",
            f"{python_path}:10",
            "'accelerators' is a key of backend onnxruntime recipes, not python: remove it or change the backend",
        ),
    ]
    toy_path = write(
        "toy.yaml",
        TOY_RECIPE.replace("max_batch_size: 3", "max_batch_size: 4") + "toy: {a: 1}\n"
        "tensorrt: {fp16: true}\n",
    )
    with REGISTRY.registered(RulesToyBackend()):
        (error,) = _errors(toy_path)  # its own key 'toy' is fine; tensorrt's is not
        assert (error.message, error.where) == ("tensorrt: unknown key", f"{toy_path}:10")
        assert error.hint.startswith(
            "'tensorrt' is a key of backend tensorrt recipes, not rules-toy"
        )
        (error,) = _errors(
            write("py2.yaml", PY_RECIPE + "toy: {a: 1}\n")
        )  # and its key is not python's
        assert error.hint.startswith("'toy' is a key of backend rules-toy recipes, not python")


def test_a_recipe_type_of_another_kind_is_refused_at_registration():
    class Borrower(RulesToyBackend):
        name = "rules-borrower"
        recipe_type = RulesRecipe  # backend: Literal["rules-toy"]
        step_toolchain = {"rules-borrower.none": ("tritonbuild",)}  # noqa: RUF012 - as above

    class Bare(Borrower):
        name = "rules-bare"
        recipe_type = Recipe  # backend: str, no kind of its own
        step_toolchain = {"rules-bare.none": ("tritonbuild",)}  # noqa: RUF012 - as above

    with pytest.raises(
        ValueError, match=r"RulesRecipe.backend must be Literal\['rules-borrower'\]"
    ):
        REGISTRY.register(Borrower())
    with pytest.raises(ValueError, match=r"Recipe.backend must be Literal\['rules-bare'\]"):
        REGISTRY.register(Bare())
    assert not {"rules-borrower", "rules-bare"} & set(REGISTRY.names())
    assert not {"rules-borrower", "rules-bare"} & set(REGISTRY.recipe_kinds())


def test_builtin_backend_rules_live_in_the_backends(write):
    """recipe.rules.check_rules alone passes a python recipe without outputs and a tensorrt recipe with a bad
    profile: those rules are the backends' (the load path asks the registry for them)."""
    no_outputs = PythonRecipe.model_validate(
        {
            "name": "m",
            "version": 1,
            "backend": "python",
            "source": {"path": "model.py"},
            "inputs": [],
        }
    )
    assert check_rules(no_outputs, []) == []
    assert [loc for loc, _, _ in REGISTRY.get("python").check_recipe(no_outputs)] == [
        ("inputs",),
        ("outputs",),
    ]
    bad_profile = TensorRTRecipe.model_validate(
        {
            "name": "m",
            "version": 1,
            "backend": "tensorrt",
            "source": {"path": "m.onnx"},
            "tensorrt": {"profiles": [{"x": {"min": [1], "opt": [2], "max": [1]}}]},
        }
    )
    assert check_rules(bad_profile, []) == []
    (problem,) = REGISTRY.get("tensorrt").check_recipe(bad_profile)
    assert problem[0] == ("tensorrt", "profiles", 0, "x") and "min <= opt <= max" in problem[1]


def test_problems_keep_their_order(write):
    """Generic serving rules, then the backend's, then the model-wide ones (as before the move)."""
    text = (
        PY_RECIPE.replace("outputs: [{name: Y, dtype: fp32, dims: [3]}]\n", "")
        + "batching: {preferred_batch_sizes: [8]}\nwarmup: {batch_size: 9}\n"
    )
    keys = [e.message.split(":")[0] for e in _errors(write("r.yaml", text))]
    assert keys == ["batching.preferred_batch_sizes[0]", "outputs", "warmup.batch_size"]


def _backend_names_used(path: Path, names: set[str]) -> list[str]:
    """'file:line' of each comparison (`recipe.backend == "tensorrt"`) or Literal (`backend: Literal["python"]`)
    in path with a backend's name in it."""
    return [
        f"{path.name}:{node.lineno}"
        for node in ast.walk(ast.parse(path.read_text()))
        if (
            isinstance(node, ast.Compare)
            or (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Name)
                and node.value.id == "Literal"
            )
        )
        and any(isinstance(part, ast.Constant) and part.value in names for part in ast.walk(node))
    ]


def test_recipe_package_names_no_backend():
    """recipe/ declares no recipe kind (each backend's module declares its recipe type, `backend: Literal[...]`)
    and no rule of it branches on a backend: those live in the backends' check_recipe."""
    names = set(REGISTRY.names())
    assert {"python", "onnxruntime", "pytorch", "tensorrt", "tensorrtllm", "ensemble"} <= names
    found = [
        hit for path in sorted(RECIPE_DIR.glob("*.py")) for hit in _backend_names_used(path, names)
    ]
    assert found == []
