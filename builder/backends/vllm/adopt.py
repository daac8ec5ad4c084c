"""`tritonbuild adopt` of a vLLM-backend model: its config.pbtxt and <version>/model.json as a vllm
recipe. The checkpoint must be a directory this machine has (inside the version directory, as
model.json names it under the server's mount, or an absolute path): a Hugging Face Hub id is not a
build input (nothing downloads here)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tritonbuild.backends.vllm.extra import OWNED
from tritonbuild.errors import UsageError
from tritonbuild.triton.config import enum_name
from tritonbuild.triton.refusals import refusal
from tritonbuild.triton.rules import VERSION_RE

# config.pbtxt fields the vllm recipe reproduces (its emitter writes them: decoupled, KIND_MODEL,
# batch size 0)
_CONFIG_FIELDS = {"name", "backend", "max_batch_size", "instance_group", "model_transaction_policy"}
_HINT = (
    "publish the repository as it is ('tritonbuild publish DIR URL'), or write this model's "
    "recipe by hand"
)


# what the vllm recipe's emitter writes (emit.py): a config that says otherwise is refused, not
# rewritten
_WHY = {
    "instance_group": "the vllm recipe writes one KIND_MODEL group of count 1 (the vLLM backend "
    "places the engine itself); without one, Triton would complete a KIND_GPU/KIND_CPU group",
    "max_batch_size": "the vllm recipe writes max_batch_size 0 (vLLM batches inside the engine)",
    "model_transaction_policy": "the vllm recipe writes decoupled: true (responses stream)",
}
_FIX = {
    "instance_group": "write instance_group [ { count: 1 kind: KIND_MODEL } ] as vllm_backend's "
    "sample does"
}


def _differs(mc) -> list[str]:
    """The fields the vllm recipe carries whose value is not the one its emitter writes."""
    groups = [
        (enum_name(g, "kind", g.kind), g.count or 1, list(g.gpus), g.name)
        for g in mc.instance_group
    ]
    out = [] if groups == [("KIND_MODEL", 1, [], "")] else ["instance_group"]
    out += ["max_batch_size"] if mc.max_batch_size else []
    policy = mc.model_transaction_policy
    decoupled = not mc.HasField("model_transaction_policy") or policy.decoupled
    return out + ([] if decoupled else ["model_transaction_policy"])


def _checkpoint(model: str, model_dir: Path, version: int) -> tuple[Path, str]:
    """(the checkpoint directory here, the mount the server sees the repository under)."""
    tail = f"/{model_dir.name}/{version}/"
    if tail in model and (model_dir / str(version) / model.split(tail, 1)[1]).is_dir():
        return model_dir / str(version) / model.split(tail, 1)[1], model.split(tail, 1)[0] or "/"
    if model.startswith("/") and Path(model).is_dir():
        return Path(model), "/models"
    raise UsageError(
        f"{model_dir.name}: model.json's model {model!r} is not a checkpoint directory here (a "
        "Hugging Face Hub id, or a path this machine lacks): tritonbuild builds from a checkpoint "
        "directory",
        where=str(model_dir / str(version) / "model.json"),
        hint=f"download it (huggingface-cli download {model} --local-dir DIR), point model.json's "
        "model at DIR, and adopt again",
    )


def adopt_vllm(mc, model_dir: Path, out: Path, engine_fields: set[str]) -> tuple[dict, int]:
    """The recipe of a vLLM model directory (its newest version), the checkpoint copied under
    out."""
    versions = sorted(
        int(d.name) for d in model_dir.iterdir() if d.is_dir() and VERSION_RE.match(d.name)
    )
    if not versions or not (model_dir / str(versions[-1]) / "model.json").is_file():
        raise UsageError(
            f"{model_dir.name}: no version directory with a model.json",
            where=str(model_dir),
            hint="the vllm backend loads <version>/model.json",
        )
    version = versions[-1]
    spec = json.loads((model_dir / str(version) / "model.json").read_text())
    fields = sorted({f.name for f, _ in mc.ListFields()} - _CONFIG_FIELDS) + _differs(mc)
    if fields:
        raise refusal(model_dir, fields, "vllm recipe", why=_WHY, fix=_FIX)
    owned = sorted(f"model.json {k}" for k in spec if k != "model" and k in OWNED)
    if owned:
        raise UsageError(
            f"{model_dir.name}: {owned} have no vllm recipe key yet",
            where=str(model_dir / str(version) / "model.json"),
            hint=_HINT,
        )
    ckpt, mount = _checkpoint(str(spec.get("model", "")), model_dir, version)
    shutil.copytree(ckpt, out / model_dir.name / "checkpoint", dirs_exist_ok=True)
    recipe = {
        "name": model_dir.name,
        "version": version,
        "backend": "vllm",
        "checkpoint": {"path": f"{model_dir.name}/checkpoint"},
        "engine_args": {k: v for k, v in spec.items() if k in engine_fields},
        "serving": {"repository_mount": mount},
        "verify": {"goldens": f"goldens/{model_dir.name}.npz"},
    }
    if extra := {k: v for k, v in spec.items() if k != "model" and k not in engine_fields}:
        recipe["engine_args"]["extra"] = extra  # any other AsyncEngineArgs field, checked at load
    return recipe, version
