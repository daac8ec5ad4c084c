"""What adopt does with each field of a hand-written config.pbtxt: carried into the recipe, or refused
naming config.pbtxt:line, the field, why and the fix. Nothing is dropped: a field (or a field of an
input, output or instance group) outside what a recipe carries is a refusal. Instance groups keep
Triton's own completion (tests/contracts/facts/triton_instance_groups.json): no instance_group stays
none, so Triton applies its default where it loads the model; an unset count is the count Triton
gives; labels files (label_filename) travel beside the config."""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from tritonbuild.errors import UsageError
from tritonbuild.triton.config import enum_name, field_line, field_lines
from tritonbuild.triton.refusals import PUBLISH, refusal
from tritonbuild.triton.rules import backend_after_autofill, default_instance_count

# ModelConfig fields a recipe carries (the rest are refused below, by name, with the reason)
CARRIED = {
    "name",
    "backend",
    "platform",
    "max_batch_size",
    "input",
    "output",
    "instance_group",
    "dynamic_batching",
    "parameters",
    "version_policy",
    "default_model_filename",
}
__all__ = ["PUBLISH", "instances", "labels", "refusal", "unexpressed"]
TENSOR_FIELDS = {"name", "data_type", "dims", "optional"}
OUTPUT_FIELDS = TENSOR_FIELDS | {"label_filename"}
GROUP_FIELDS = {"kind", "count", "gpus"}


def unexpressed(mc, consumes: frozenset[str] = frozenset()) -> list[str]:
    """The fields of mc no recipe carries, as config paths ('output[1].reshape'); consumes: the
    top-level fields the backend's recipe carries besides CARRIED (Backend.adopt_consumes)."""
    out = [f.name for f, _ in mc.ListFields() if f.name not in CARRIED | consumes]
    for kind, allowed in (("input", TENSOR_FIELDS), ("output", OUTPUT_FIELDS)):
        for i, tensor in enumerate(getattr(mc, kind)):
            out += [
                f"{kind}[{i}].{f.name}" for f, _ in tensor.ListFields() if f.name not in allowed
            ]
    for i, group in enumerate(mc.instance_group):
        out += [
            f"instance_group[{i}].{f.name}"
            for f, _ in group.ListFields()
            if f.name not in GROUP_FIELDS
        ]
    for i, tensor in enumerate(mc.output):
        if tensor.label_filename and len(PurePosixPath(tensor.label_filename).parts) != 1:
            out.append(f"output[{i}].label_filename")
    return sorted(out)


def instances(mc, model_dir: Path) -> tuple[list[dict], list[str]]:
    """The recipe's instances and what adopt says about them. No instance_group: none ([]), and
    Triton completes it where it loads the model, as it does the original's. A group without count
    gets the count Triton gives it (SetDefaultInstanceCount); refused where that depends on the
    host (KIND_AUTO of a backend whose CPU default is not 1)."""
    if not mc.instance_group:
        backend = backend_after_autofill(mc, model_dir)
        cpu = default_instance_count("KIND_CPU", backend)
        return [], [
            "no instance_group: left to Triton, which completes it where it loads the model (the "
            "backend's preferred group, else one group named after the model: KIND_GPU with one "
            f"instance on each visible GPU when the server has one, else KIND_CPU count {cpu})"
        ]
    groups, notes = [], []
    for i, g in enumerate(mc.instance_group):
        kind = enum_name(g, "kind", g.kind)
        count = g.count
        if count < 1:
            count = default_instance_count(kind, backend_after_autofill(mc, model_dir))
            if count is None:
                raise refusal(model_dir, [f"instance_group[{i}].count"]) from None
            notes.append(f"instance_group[{i}] has no count: Triton's default for {kind}, {count}")
        group = {"kind": kind.removeprefix("KIND_").lower(), "count": count}
        groups.append(group | ({"gpus": list(g.gpus)} if g.gpus else {}))
    return groups, notes


def labels(mc, model_dir: Path, out: Path) -> dict[str, str]:
    """Each output's labels file copied to out/<model>/<label_filename>: the recipe's labels (output
    name → file, relative to the recipe). A labels file that is missing is refused (Triton fails
    the load)."""
    carried = {}
    for i, tensor in enumerate(mc.output):
        if not tensor.label_filename:
            continue
        src = model_dir / tensor.label_filename
        if not src.is_file():
            config = model_dir / "config.pbtxt"
            line = field_line(
                field_lines(config.read_text(errors="replace")), f"output[{i}].label_filename"
            )
            raise UsageError(
                f"{model_dir.name}: output {tensor.name!r} names label_filename "
                f"{tensor.label_filename!r}, which {model_dir} does not hold (Triton fails the load)",
                where=f"{config}:{line}" if line else str(config),
                hint=f"put the labels file (one class a line) at {src}, or remove label_filename",
            )
        (out / model_dir.name).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, out / model_dir.name / tensor.label_filename)
        carried[tensor.name] = f"{model_dir.name}/{tensor.label_filename}"
    return carried
