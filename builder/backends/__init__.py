"""One module per Triton backend: its build steps, the ModelConfig it needs, how it is verified."""

from __future__ import annotations

from types import ModuleType

from builder.errors import PlanError


def backend_for(name: str) -> ModuleType:
    from builder.backends import onnxruntime, python

    table = {"python": python, "onnxruntime": onnxruntime}
    try:
        return table[name]
    except KeyError:
        raise PlanError(f"backend {name!r} is not supported yet", hint=f"use one of {sorted(table)}") from None
