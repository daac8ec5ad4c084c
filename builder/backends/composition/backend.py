"""Ensembles (platform: ensemble) and BLS pipelines (a Python model) built from other recipes'
models.

Checked against the step models' real inputs and outputs at assembly: every mapped tensor exists,
dtypes agree across each mapping, batch sizes are consistent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Literal

from tritonbuild.backends.base import Backend, StepContext
from tritonbuild.errors import BuildError
from tritonbuild.recipe.composition import CompositionRecipe
from tritonbuild.recipe.models import InstanceGroup, TensorSpec

BLS_MODEL = Path(__file__).parents[1] / "models" / "bls_chain.py"
KEEP = ".keep"


def plan_steps(loaded, ctx) -> list:
    return []


def derive_io(recipe, files, recipe_dir=None):
    return recipe.inputs, recipe.outputs


class EnsembleRecipe(CompositionRecipe):
    """A pipeline run by Triton's ensemble scheduler (platform: ensemble)."""

    backend: Literal["ensemble"]


class BLSRecipe(CompositionRecipe):
    """A pipeline run by a generated Python (BLS) model."""

    backend: Literal["bls"]


def _check(r: CompositionRecipe, known: dict) -> list[str]:
    problems = []
    dtypes = {t.name: t.dtype for t in r.inputs}
    for i, step in enumerate(r.steps):
        step_model = known.get(step.model)
        if step_model is None:
            problems.append(
                f"steps[{i}].model: {step.model!r} is not built by these recipes (built: "
                f"{sorted(known)})"
            )
            continue
        ins = {t.name: t for t in step_model.inputs}
        outs = {t.name: t for t in step_model.outputs}
        for model_input, tensor in step.inputs.items():
            if model_input not in ins:
                problems.append(
                    f"steps[{i}].inputs.{model_input}: {step.model} has no input {model_input!r} "
                    f"(inputs: {sorted(ins)})"
                )
            elif tensor in dtypes and dtypes[tensor] != ins[model_input].dtype:
                problems.append(
                    f"steps[{i}].inputs.{model_input}: tensor {tensor!r} is {dtypes[tensor]} but "
                    f"{step.model} input {model_input!r} is {ins[model_input].dtype}"
                )
        missing_required = sorted(
            n for n, t in ins.items() if not t.optional and n not in step.inputs
        )
        if missing_required:
            problems.append(
                f"steps[{i}].inputs: {step.model} needs {missing_required}, which are not mapped"
            )
        for model_output, tensor in step.outputs.items():
            if model_output not in outs:
                problems.append(
                    f"steps[{i}].outputs.{model_output}: {step.model} has no output "
                    f"{model_output!r} (outputs: {sorted(outs)})"
                )
            else:
                dtypes[tensor] = outs[model_output].dtype
        if step_model.max_batch_size and r.max_batch_size > step_model.max_batch_size:
            problems.append(
                f"max_batch_size {r.max_batch_size} exceeds {step.model}'s "
                f"{step_model.max_batch_size}"
            )
        # NOTE: a batching ensemble may call a non-batching step (Triton compares full shapes,
        # ensemble_utils.cc ValidateTensorConsistency); verify's Triton core check judges the
        # shapes.
    for j, t in enumerate(r.outputs):
        if t.name in dtypes and dtypes[t.name] != t.dtype:
            problems.append(
                f"outputs[{j}]: {t.name!r} is declared {t.dtype} but its step writes "
                f"{dtypes[t.name]}"
            )
    return problems


def emit(built_model, root: Path, store, manifest_model, known: dict) -> list:
    from tritonbuild.triton.config import add_tensors, model_config_pb2, write_config

    r: CompositionRecipe = built_model.plan.recipe
    problems = _check(r, known)
    if problems:
        raise BuildError(
            f"{r.backend} {r.name!r}: " + "; ".join(problems),
            where=built_model.plan.recipe_path,
            hint="map tensors to the step models' real names and types (see their config.pbtxt)",
        )
    pb2 = model_config_pb2()
    mc = pb2.ModelConfig()
    mc.name = r.name
    vdir = root / r.name / str(r.version)
    vdir.mkdir(parents=True)
    if r.backend == "ensemble":
        mc.platform = "ensemble"
    else:
        mc.backend = "python"
    mc.max_batch_size = r.max_batch_size
    mc.version_policy.latest.num_versions = 1
    add_tensors(mc.input, r.inputs, pb2, True)
    add_tensors(mc.output, r.outputs, pb2, False)
    steps = [
        {
            "model": s.model,
            "version": s.version,
            "inputs": dict(sorted(s.inputs.items())),
            "outputs": dict(sorted(s.outputs.items())),
        }
        for s in r.steps
    ]
    if r.backend == "ensemble":
        _schedule_ensemble(mc, steps, vdir)
    else:
        _write_bls_model(mc, r, steps, vdir, pb2)
    write_config(root / r.name, mc)
    return [_manifest_entry(manifest_model, r, steps, known)]


def _schedule_ensemble(mc, steps: list[dict], vdir: Path) -> None:
    """The steps as Triton's ensemble scheduler runs them; the version directory stays empty
    (KEEP)."""
    for s in steps:
        step = mc.ensemble_scheduling.step.add()
        step.model_name, step.model_version = s["model"], s["version"]
        for k, v in s["inputs"].items():
            step.input_map[k] = v
        for k, v in s["outputs"].items():
            step.output_map[k] = v
    (vdir / KEEP).write_bytes(b"")


def _write_bls_model(mc, r: CompositionRecipe, steps: list[dict], vdir: Path, pb2) -> None:
    """A BLS: its instances, the steps as a config parameter and models/bls_chain.py as model.py."""
    for g in r.instances:
        ig = mc.instance_group.add()
        ig.kind = pb2.ModelInstanceGroup.Kind.Value(f"KIND_{g.kind.upper()}")
        ig.count = g.count
    mc.parameters["steps"].string_value = json.dumps(steps, sort_keys=True, separators=(",", ":"))
    mc.default_model_filename = "model.py"
    shutil.copyfile(BLS_MODEL, vdir / "model.py")


def _manifest_entry(manifest_model, r: CompositionRecipe, steps: list[dict], known: dict):
    return manifest_model(
        name=r.name,
        version=r.version,
        backend="ensemble" if r.backend == "ensemble" else "python",
        target="cpu",
        model_identity=_identity(steps, known),
        inputs=[TensorSpec(**t.model_dump()) for t in r.inputs],
        outputs=[TensorSpec(**t.model_dump()) for t in r.outputs],
        max_batch_size=r.max_batch_size,
        depends_on=sorted({s.model for s in r.steps}),
    )


def _identity(steps: list, known: dict) -> str:
    from tritonbuild.core.hashing import sha256_json

    return sha256_json(
        {"steps": steps, "models": {s["model"]: known[s["model"]].model_identity for s in steps}}
    )


class CompositionBackend(Backend):
    """Ensembles and BLS pipelines: no build step; emitted last, against the models they call."""

    step_toolchain = {}
    route = "live-embedded"  # when every step model is (verify checks each model's dependencies)
    needs_built_models = True
    emits = True

    plan_steps = staticmethod(plan_steps)
    derive_io = staticmethod(derive_io)

    def __init__(
        self, name: str, triton_backend: str, recipe_type: type, *, loads_dependencies: bool = False
    ):
        self.name, self.triton_backend, self.loads_dependencies = (
            name,
            triton_backend,
            loads_dependencies,
        )
        self.recipe_type = recipe_type

    def run_step(self, ctx: StepContext) -> None:
        raise AssertionError(f"{self.name} has no build steps")

    def emit(self, built_model, root: Path, store, manifest_model, built: dict) -> list:
        return emit(built_model, root, store, manifest_model, built)


class EnsembleBackend(CompositionBackend):
    """A composition run by Triton's ensemble scheduler: explicit step versions, no instances of its
    own."""

    def check_recipe(self, recipe) -> list[tuple]:
        out = []
        for i, step in enumerate(recipe.steps):
            if step.version == 0:
                out.append(
                    (
                        ("steps", i, "version"),
                        "version 0 does not exist (versions start at 1)",
                        "use -1 (latest) or a real version",
                    )
                )
        if len(recipe.instances) and recipe.instances != [InstanceGroup()]:
            out.append(
                (
                    ("instances",),
                    "an ensemble has no instances of its own (Triton rejects instance_group)",
                    "remove 'instances'",
                )
            )
        return out

    def adopt_calls(self, mc) -> list[str]:
        return [step.model_name for step in mc.ensemble_scheduling.step]

    def adopt_recipe(self, mc, model_dir: Path, out: Path) -> tuple[dict, int]:
        from tritonbuild.backends.composition.adopt import ensemble_recipe

        return ensemble_recipe(mc, model_dir)


# Triton loads an ensemble's steps with it
ENSEMBLE = EnsembleBackend("ensemble", "ensemble", EnsembleRecipe, loads_dependencies=True)
BLS = CompositionBackend("bls", "python", BLSRecipe)
