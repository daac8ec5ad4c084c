"""The backend registry: every built-in registered once, duplicates refused, stages' questions answered."""

from __future__ import annotations

from typing import Literal

import pytest

from tritonbuild.backends import REGISTRY, Backend, StepContext
from tritonbuild.backends.base import ROUTES
from tritonbuild.backends.registry import DuplicateBackend, Registry
from tritonbuild.errors import PlanError
from tritonbuild.recipe.models import Recipe

BUILTIN = ["python", "onnxruntime", "pytorch", "tensorrt", "tensorrtllm", "vllm", "ensemble", "bls"]


class EchoRecipe(Recipe):
    backend: Literal["echo-test"]


class _Echo(Backend):
    name = "echo-test"
    recipe_type = EchoRecipe
    step_toolchain = {"echo.copy": ("tritonbuild",)}
    triton_backend = "python"
    route = "live-embedded"

    def plan_steps(self, loaded, ctx):
        return []

    def run_step(self, ctx: StepContext) -> None:
        pass

    def derive_io(self, recipe, files, recipe_dir):
        return [], []


def test_every_builtin_backend_is_registered_with_a_declared_route():
    assert REGISTRY.names() == BUILTIN
    for backend in REGISTRY.all():
        assert backend.route in ROUTES, backend.name
        assert REGISTRY.get(backend.name) is backend


def test_step_kinds_belong_to_one_backend_each():
    kinds = [k for b in REGISTRY.all() for k in b.step_toolchain]
    assert len(kinds) == len(set(kinds))
    assert REGISTRY.for_step("onnx.export").name == "onnxruntime"
    assert REGISTRY.step_toolchain("python.package") == ("tritonbuild",)
    assert REGISTRY.step_toolchain("no.such-kind") is None


def test_duplicate_name_is_refused_and_leaves_the_registry_unchanged():
    registry = Registry()
    registry.register(_Echo())
    with pytest.raises(DuplicateBackend, match="already registered"):
        registry.register(_Echo())
    clash = type("Clash", (_Echo,), {"name": "python"})()
    with pytest.raises(DuplicateBackend, match="'python' is already registered"):
        registry.register(clash)
    assert registry.names().count("python") == 1


def test_duplicate_step_kind_is_refused():
    stealer = type(
        "Stealer", (_Echo,), {"name": "stealer", "step_toolchain": {"python.package": ()}}
    )()
    with pytest.raises(
        DuplicateBackend, match=r"step kinds \['python.package'\] belong to 'python'"
    ):
        Registry().register(stealer)


def test_an_undeclared_route_is_refused():
    liar = type("Liar", (_Echo,), {"route": "live-somewhere"})()
    with pytest.raises(ValueError, match="route 'live-somewhere'"):
        Registry().register(liar)


def test_scoped_registration_is_undone():
    with REGISTRY.registered(_Echo()) as echo:
        assert REGISTRY.get("echo-test") is echo
    with pytest.raises(PlanError, match="not supported"):
        REGISTRY.get("echo-test")
    assert REGISTRY.for_step("echo.copy") is None


def test_triton_backend_questions():
    assert (
        REGISTRY.for_triton("python").name == "python"
    )  # built-ins first (bls also writes python models)
    assert REGISTRY.route_for_triton("onnxruntime") == "in-process"
    assert REGISTRY.route_for_triton("no-such-backend") == "none"
    assert REGISTRY.model_files()["pytorch"] == {
        "": "model.pt",
        "pytorch_libtorch": "model.pt",
        "torch_aoti": "model.pt2",
    }
