"""`tritonbuild adopt` of an ensemble (platform: ensemble): the ensemble composition recipe,
Triton's ensemble_scheduling steps as they are (model, version, input_map, output_map). The models
the steps call are adopted by the stage first (Backend.adopt_calls); a config field the recipe
cannot hold is refused by name."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.errors import UsageError
from tritonbuild.recipe.models import DTYPES
from tritonbuild.triton.refusals import refusal
from tritonbuild.triton.rules import VERSION_RE

_TRITON_DTYPES = {triton: ours for ours, triton in DTYPES.items()}
# ModelConfig fields the ensemble recipe reproduces (its emitter writes the platform and
# version_policy latest 1)
_EXPRESSED = {
    "name",
    "platform",
    "max_batch_size",
    "input",
    "output",
    "ensemble_scheduling",
    "version_policy",
}
_TENSOR_FIELDS = {"name", "data_type", "dims", "optional"}
_STEP_FIELDS = {"model_name", "model_version", "input_map", "output_map"}
_WHY = {
    "version_policy": "other than Triton's default, latest 1: an ensemble recipe serves one version",
    "parameters": "an ensemble recipe has no parameters",
}


def _unexpressed(mc) -> list[str]:
    out = [field.name for field, _ in mc.ListFields() if field.name not in _EXPRESSED]
    policy = mc.version_policy
    if mc.HasField("version_policy") and not (
        policy.WhichOneof("policy_choice") == "latest" and policy.latest.num_versions == 1
    ):
        out.append("version_policy")
    for kind in ("input", "output"):
        for i, tensor in enumerate(getattr(mc, kind)):
            out += [
                f"{kind}[{i}].{field.name}"
                for field, _ in tensor.ListFields()
                if field.name not in _TENSOR_FIELDS
            ]
    for i, step in enumerate(mc.ensemble_scheduling.step):
        out += [
            f"ensemble_scheduling.step[{i}].{field.name}"
            for field, _ in step.ListFields()
            if field.name not in _STEP_FIELDS
        ]
    return sorted(out)


def _tensors(mc, kind: str, where: str) -> list[dict]:
    out = []
    for i, tensor in enumerate(getattr(mc, kind)):
        triton = (
            type(tensor)
            .DESCRIPTOR.fields_by_name["data_type"]
            .enum_type.values_by_number[tensor.data_type]
            .name
        )
        if triton not in _TRITON_DTYPES:
            raise UsageError(
                f"{kind}[{i}] {tensor.name!r}: data_type {triton} has no recipe dtype",
                where=where,
                hint=f"recipe dtypes: {sorted(DTYPES.values())}",
            )
        spec = {"name": tensor.name, "dtype": _TRITON_DTYPES[triton], "dims": list(tensor.dims)}
        out.append(spec | ({"optional": True} if kind == "input" and tensor.optional else {}))
    return out


def _steps(mc, name: str, where: str) -> list[dict]:
    steps = []
    for i, step in enumerate(mc.ensemble_scheduling.step):
        # 0: unset, the proto's default, not a version directory Triton serves
        if step.model_version == 0:
            raise UsageError(
                f"{name}: ensemble step {i} ({step.model_name}) has no model_version",
                where=where,
                hint="set model_version: -1 (the latest) or the version the ensemble calls",
            )
        steps.append(
            {
                "model": step.model_name,
                "version": step.model_version,
                "inputs": dict(sorted(step.input_map.items())),
                "outputs": dict(sorted(step.output_map.items())),
            }
        )
    return steps


def ensemble_recipe(mc, model_dir: Path) -> tuple[dict, int]:
    """The ensemble recipe of model_dir's config, at its newest version directory."""
    where = str(model_dir / "config.pbtxt")
    extra = _unexpressed(mc)
    if extra:
        raise refusal(model_dir, extra, "ensemble recipe", why=_WHY)
    versions = sorted(
        int(d.name) for d in model_dir.iterdir() if d.is_dir() and VERSION_RE.match(d.name)
    )
    if not versions:
        raise UsageError(
            f"{model_dir.name}: no version directory (Triton serves an ensemble from an empty "
            "<version>/ directory beside its config.pbtxt)",
            where=str(model_dir),
            hint=f"mkdir {model_dir / '1'}",
        )
    recipe = {
        "name": model_dir.name,
        "version": versions[-1],
        "backend": "ensemble",
        "max_batch_size": mc.max_batch_size,
        "inputs": _tensors(mc, "input", where),
        "outputs": _tensors(mc, "output", where),
        "steps": _steps(mc, model_dir.name, where),
        "verify": {"goldens": f"goldens/{model_dir.name}.npz"},
    }
    return recipe, versions[-1]
