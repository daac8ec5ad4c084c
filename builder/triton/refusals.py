"""A config.pbtxt field that a recipe cannot carry, refused as a user sees it: config.pbtxt:line, the
field, why, and the fix (tritonbuild adopt; the adopt of each backend's own shape uses it too)."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.errors import UsageError
from tritonbuild.triton.config import field_line, field_lines

PUBLISH = (
    "publish the repository as it is ('tritonbuild publish DIR URL'), or write this model's recipe "
    "by hand"
)
_NO_KEY = "no recipe key holds it"
_WHY = {
    "sequence_batching": "a stateful model's sequence batcher, which no recipe key holds",
    "ensemble_scheduling": "ensemble steps belong to an ensemble (platform: ensemble)",
    "model_warmup": "hand-written warmup samples; a recipe's 'warmup:' generates its own (zero, "
    "random or the goldens)",
    "model_transaction_policy": "a decoupled model's transaction policy, which no recipe key holds",
    "response_cache": "Triton's response cache, which no recipe key holds",
    "optimization": "this backend's recipe has no key for optimization settings",
    "batch_input": "ragged batching inputs, which no recipe key holds",
    "batch_output": "ragged batching outputs, which no recipe key holds",
    "runtime": "a backend runtime override, which no recipe key holds",
    "cc_model_filenames": "per-GPU model files, which a one-file recipe cannot hold",
    "dynamic_batching.priority_levels": "priorities and queue policies are not adopted yet",
    "dynamic_batching.default_queue_policy": "priorities and queue policies are not adopted yet",
    "dynamic_batching.priority_queue_policy": "priorities and queue policies are not adopted yet",
    "instance_group.name": "recipe instance groups have no name (Triton names an unnamed group "
    "<model>_<index>)",
    "output.label_filename": "a labels file in a directory below the model's: adopt places it "
    "beside config.pbtxt",
}
_QUEUES = "adopt the model without them, then add them under 'batching:' in its recipe by hand"
_FIX = {
    "dynamic_batching.priority_levels": _QUEUES,
    "dynamic_batching.default_queue_policy": _QUEUES,
    "dynamic_batching.priority_queue_policy": _QUEUES,
    "model_warmup": "remove model_warmup, adopt, then add 'warmup:' to the recipe",
    "instance_group.name": "remove the group's name (its instances are then named <model>_<index>_"
    "<n>)",
    "output.label_filename": "move the labels file beside config.pbtxt and name it alone "
    '(label_filename: "labels.txt")',
}


def _generic(path: str) -> str:
    """'output[2].reshape' → 'output.reshape': the key of _WHY and _FIX."""
    return ".".join(part.split("[")[0] for part in path.split("."))


def refusal(
    model_dir: Path,
    fields: list[str],
    what: str = "recipe",
    why: dict[str, str] | None = None,
    fix: dict[str, str] | None = None,
) -> UsageError:
    """One error for every field of model_dir's config a recipe cannot carry: config.pbtxt:line, the
    field, why, and the fix; why/fix: a caller's own reasons by field (its generic spelling)."""
    whys, fix_of = {**_WHY, **(why or {})}, {**_FIX, **(fix or {})}
    config = model_dir / "config.pbtxt"
    lines = field_lines(config.read_text(errors="replace"))
    rows, fixes = [], []
    for path in fields:
        line = field_line(lines, path)
        rows.append(
            (f"{config.name}:{line}: {path}: " if line else f"{config.name}: {path} (not set): ")
            + f"{whys.get(_generic(path), whys.get(path.split('[')[0], _NO_KEY))}"
        )
        each = fix_of.get(_generic(path))
        fixes += [each] if each and each not in fixes else []
    first = field_line(lines, fields[0])
    return UsageError(
        f"{model_dir.name}: config fields {fields} have no {what} key yet:\n  " + "\n  ".join(rows),
        where=f"{config}:{first}" if first else str(config),
        hint="; ".join([*fixes, PUBLISH] if len(fixes) < len(rows) else fixes),
    )
