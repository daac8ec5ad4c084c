"""Backends: one plug-in per recipe kind (its build steps, the ModelConfig it needs, how it is
verified), behind the typed interface in `base.py` and registered in `registry.py`. Stages ask the
registry."""

from __future__ import annotations

from tritonbuild.backends.base import Backend, BuildPolicy, ReleaseFact, StepContext
from tritonbuild.backends.registry import REGISTRY


def backend_for(name: str) -> Backend:
    """The registered backend of a recipe kind (PlanError naming the known ones otherwise)."""
    return REGISTRY.get(name)


def runs_embedded(triton_backend: str) -> bool:
    """Whether the embedded tritonserver (Python backend only) can load models of this Triton
    backend."""
    return REGISTRY.route_for_triton(triton_backend) == "live-embedded"


class StepSkipped(Exception):
    """A build step that cannot run here (missing tool or hardware); the message says why and what
    to do."""


__all__ = [
    "REGISTRY",
    "Backend",
    "BuildPolicy",
    "ReleaseFact",
    "StepContext",
    "StepSkipped",
    "backend_for",
    "runs_embedded",
]
