"""A backend's tools are in the build cache key: each registered backend declares the distributions its steps
run (Backend.tools); registering hands them to the toolchain fingerprint, and a backend whose step keys on a tool
the fingerprint does not hold is refused. Before, such a key was dropped silently (core/toolchain.for_step keeps
only keys it has), so upgrading that tool never rebuilt."""

from __future__ import annotations

from typing import Literal

import pytest

from tritonbuild.backends import REGISTRY
from tritonbuild.backends.base import Backend
from tritonbuild.core import toolchain
from tritonbuild.plan.planner import cache_key
from tritonbuild.recipe.models import Recipe


class ToolRecipe(Recipe):
    backend: Literal["tool-toy"]


def _toy(tools: dict[str, str]) -> Backend:
    class ToolToy(Backend):
        name = "tool-toy"
        recipe_type = ToolRecipe
        step_toolchain = {"tool-toy.run": ("tritonbuild", "pytest")}
        triton_backend = "python"
        route = "none"

        def plan_steps(self, loaded, ctx) -> list:
            return []

        def run_step(self, ctx) -> None:
            raise AssertionError("no steps")

        def derive_io(self, recipe, files, recipe_dir):
            return list(recipe.inputs), list(recipe.outputs)

    ToolToy.tools = tools
    return ToolToy()


def test_every_registered_backends_step_keys_are_in_the_fingerprint():
    REGISTRY.toolchain()
    known = toolchain.known_keys()
    for backend in REGISTRY.all():
        for kind, keys in backend.step_toolchain.items():
            assert set(keys or ()) <= known, (backend.name, kind)
        assert set(backend.tools) <= known


def test_a_backend_keying_on_an_undeclared_tool_is_refused():
    # broken on purpose: the step keys on "pytest", which neither the core nor the backend declares
    with pytest.raises(
        ValueError, match=r"key on \['pytest'\].*declare them in the backend's tools"
    ):
        REGISTRY.register(_toy({}))
    assert "tool-toy" not in [b.name for b in REGISTRY.all()]


def test_a_declared_tools_version_changes_the_steps_cache_key(monkeypatch):
    monkeypatch.setattr(
        toolchain, "_DECLARED", dict(toolchain._DECLARED)
    )  # the toy's tool leaves with it
    with REGISTRY.registered(_toy({"pytest": "pytest"})):
        before = REGISTRY.toolchain()
        assert before["pytest"] == pytest.__version__
        key = cache_key("tool-toy.run", {}, {}, before)
        assert cache_key("tool-toy.run", {}, {}, {**before, "pytest": "0.0.1"}) != key
    toolchain.fingerprint.cache_clear()


def test_the_core_holds_no_backends_tool():
    # the backends' tools are declared by them, not listed by hand in core/toolchain.py
    declared = {key for backend in REGISTRY.all() for key in backend.tools}
    assert declared and not declared & set(toolchain.DISTRIBUTIONS)
