"""One module per Triton backend: its build steps, the ModelConfig it needs, how it is verified."""

from __future__ import annotations

from types import ModuleType

from tritonbuild.errors import PlanError


def backend_for(name: str) -> ModuleType:
    from tritonbuild.backends import composition, onnxruntime, python, pytorch, tensorrt, tensorrtllm, vllm

    table = {"python": python, "onnxruntime": onnxruntime, "pytorch": pytorch, "tensorrt": tensorrt,
             "tensorrtllm": tensorrtllm,
             "vllm": vllm,
             "ensemble": composition, "bls": composition}
    try:
        return table[name]
    except KeyError:
        raise PlanError(f"backend {name!r} is not supported yet", hint=f"use one of {sorted(table)}") from None


def runs_embedded(name: str) -> bool:
    """Whether the embedded tritonserver (Python backend only) can load models of this Triton backend."""
    try:
        return backend_for(name).EMBEDDED_LIVE
    except PlanError:
        return False


class StepSkipped(Exception):
    """A build step that cannot run here (missing tool or hardware); the message says why and what to do."""
