"""Composition recipes: an ensemble (Triton's scheduler) or a BLS Python model chaining other
recipes' models."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tritonbuild.recipe.models import (
    SCHEMA_VERSION,
    InstanceGroup,
    Named,
    Strict,
    TensorSpec,
    Verify,
)


class Step(Strict):
    model: str = Field(description="Name of a model built from another recipe in the same build.")
    version: int = Field(-1, description="-1 = the latest version (always written explicitly).")
    inputs: dict[str, str] = Field(description="Step model input name ← pipeline tensor name.")
    outputs: dict[str, str] = Field(description="Step model output name → pipeline tensor name.")


class CompositionRecipe(Named):
    """Models chained by tensor mappings: backend ensemble (platform: ensemble) or bls (a Python model)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    backend: str = Field(
        description="ensemble or bls (each declares its recipe type in backends/composition/backend.py)."
    )
    max_batch_size: int = Field(0, ge=0)
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    steps: list[Step] = Field(min_length=1)
    instances: list[InstanceGroup] = Field(
        default_factory=lambda: [InstanceGroup()],
        description="bls only: instances of the Python model.",
    )
    verify: Verify = Field(default_factory=Verify)


def check_composition_rules(
    recipe: CompositionRecipe, backend_problems: list[tuple]
) -> list[tuple]:
    """Data flow in step order: every tensor read is an input or written earlier; every output
    written; nothing written and never read; no step calls the composition itself. Then the
    backend's own rules (Backend.check_recipe, passed in by recipe.kinds)."""
    out, produced_by, read = _step_flow(recipe)
    return out + _unconnected(recipe, produced_by, read) + backend_problems


def _step_flow(recipe: CompositionRecipe) -> tuple[list[tuple], dict[str, int], set[str]]:
    """(problems, the step that writes each tensor, the tensors read), walking the steps in order: a
    step that calls the composition itself, reads a tensor not yet written, or writes one twice."""
    out = []
    available = {spec.name for spec in recipe.inputs}
    produced_by: dict[str, int] = {}
    read: set[str] = set()
    for i, step in enumerate(recipe.steps):
        if step.model == recipe.name:
            out.append(
                (
                    ("steps", i, "model"),
                    f"step {i} calls {recipe.name!r} itself: a cycle",
                    "remove the step or call another model",
                )
            )
        for model_input, tensor in step.inputs.items():
            read.add(tensor)
            if tensor not in available:
                out.append(_unavailable(recipe, i, model_input, tensor, available))
        for model_output, tensor in step.outputs.items():
            if tensor in produced_by or tensor in {spec.name for spec in recipe.inputs}:
                out.append(
                    (
                        ("steps", i, "outputs", model_output),
                        f"tensor {tensor!r} is written twice",
                        "give each step output its own name",
                    )
                )
            produced_by[tensor] = i
            available.add(tensor)
    return out, produced_by, read


def _unavailable(
    recipe: CompositionRecipe, i: int, model_input: str, tensor: str, available: set[str]
) -> tuple:
    """Step i reads a tensor nothing wrote before it: written only later (a cycle), or never."""
    later = [
        j for j, other in enumerate(recipe.steps) if j >= i and tensor in other.outputs.values()
    ]
    why = (
        f"it is written only by step {later[0]}, not before (a cycle)"
        if later
        else "nothing provides it"
    )
    return (
        ("steps", i, "inputs", model_input),
        f"step {i} ({recipe.steps[i].model}) reads {tensor!r} but {why}",
        f"map {model_input!r} to one of {sorted(available)}",
    )


def _unconnected(
    recipe: CompositionRecipe, produced_by: dict[str, int], read: set[str]
) -> list[tuple]:
    """Pipeline outputs no step writes, step outputs nothing uses, pipeline inputs no step reads."""
    out = []
    outputs = {spec.name for spec in recipe.outputs}
    for j, spec in enumerate(recipe.outputs):
        if spec.name not in produced_by:
            out.append(
                (
                    ("outputs", j, "name"),
                    f"output {spec.name!r} is not written by any step",
                    "map a step output to it",
                )
            )
    for tensor, i in produced_by.items():
        if tensor not in read and tensor not in outputs:
            out.append(
                (
                    ("steps", i, "outputs"),
                    f"tensor {tensor!r} is written by step {i} and never used",
                    "drop it from the step's outputs or make it a pipeline output",
                )
            )
    for j, spec in enumerate(recipe.inputs):
        if spec.name not in read:
            out.append(
                (
                    ("inputs", j, "name"),
                    f"input {spec.name!r} is not read by any step",
                    "remove it or use it",
                )
            )
    return out


def composition_cycles(recipes: list) -> list[list[str]]:
    """Cycles among composition recipes (A's step calls B, B's step calls A), as lists of names."""
    graph = {
        recipe.name: [step.model for step in recipe.steps]
        for recipe in recipes
        if isinstance(recipe, CompositionRecipe)
    }
    cycles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in graph.get(node, []):
            if state.get(nxt) == "open":
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt in graph and nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return cycles
