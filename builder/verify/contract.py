"""A model's answers against the outputs its config.pbtxt declares (data_type, dims), checked before
anything is compared or recorded: an answer of another dtype or shape is the model breaking its
contract with every client, a model error that no golden may hold (`verify --record --force`
included). Triton's Python backend, for one, returns what model.py gives whatever the config says."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tritonbuild.recipe.models import DTYPES, TensorSpec
from tritonbuild.repository.existing import config_tensors
from tritonbuild.repository.manifest import ManifestModel
from tritonbuild.triton.model_dir import ModelDir
from tritonbuild.verify.goldens import NP_DTYPES


def _dtype_ok(declared: str, got: np.ndarray) -> bool:
    if declared == "bytes":  # tritonclient gives BYTES as objects; in-process runtimes as bytes_
        return got.dtype.kind in "OS"
    if declared == "bf16":  # NOTE: tritonclient has no bfloat16: it gives BF16 as float32
        return got.dtype == np.float32 or got.dtype.name == "bfloat16"
    return got.dtype == np.dtype(NP_DTYPES[declared])


def _batch(sample: dict[str, np.ndarray]) -> int | None:
    """The batch size a batching model's request carries (its inputs' first dimension)."""
    sizes = {arr.shape[0] for arr in sample.values() if np.ndim(arr) > 0}
    return sizes.pop() if len(sizes) == 1 else None


def _shape_ok(dims: list[int], got: tuple[int, ...]) -> bool:
    return len(got) == len(dims) and all(d in (-1, g) for d, g in zip(dims, got, strict=True))


def declared(read: ModelDir, model: ManifestModel) -> tuple[list[TensorSpec], int]:
    """The outputs and max_batch_size the model's config.pbtxt declares (what Triton tells clients);
    the manifest's, which assemble wrote from the same derived I/O, where the config cannot be read
    (static checks report that)."""
    if read.config is None:
        return list(model.outputs), model.max_batch_size
    return config_tensors(read.config, "output"), read.config.max_batch_size


def violations(
    model: ManifestModel,
    inputs: list[dict],
    answers: list[dict],
    model_dir: Path | ModelDir | None = None,
) -> list[str]:
    """Per sample and output: where an answer's dtype or shape is not what the config declares
    (the batch dimension, when the model batches, is the request's). model_dir: the model's
    directory as read (a repository root: its model.name read now); None: the manifest's."""
    found = []
    if isinstance(model_dir, Path):
        model_dir = ModelDir.read(model_dir / model.name)
    outputs_declared, max_batch = (
        declared(model_dir, model)
        if model_dir is not None
        else (model.outputs, model.max_batch_size)
    )
    declared_by_name = {tensor.name: tensor for tensor in outputs_declared}
    for i, (sample, outputs) in enumerate(zip(inputs, answers, strict=True)):
        batch = _batch(sample) if max_batch > 0 else None
        for name, got in sorted(outputs.items()):
            tensor = declared_by_name.get(name)
            if tensor is None or got is None:
                continue  # an undeclared or missing output is the goldens' name check's
            got = np.asarray(got)
            dims = [batch if batch is not None else -1, *tensor.dims]
            dims = dims if max_batch > 0 else list(tensor.dims)
            problems = []
            if not _dtype_ok(tensor.dtype, got):
                problems.append(
                    f"dtype {got.dtype} where the config declares {DTYPES[tensor.dtype]}"
                )
            if not _shape_ok(dims, got.shape):
                shown = ["batch" if k == 0 and max_batch > 0 else d for k, d in enumerate(dims)]
                problems.append(f"shape {list(got.shape)} where the config declares dims {shown}")
            if problems:
                found.append(f"sample {i} output {name!r}: {' and '.join(problems)}")
    return found


def contract_note(model: ManifestModel, found: list[str], record: bool) -> str:
    """What the report says of a contract violation, and the fix (never recording it)."""
    shown = "; ".join(found[:3]) + (f"; and {len(found) - 3} more" if len(found) > 3 else "")
    refused = (
        "nothing was recorded (--force included): a golden never holds what breaks the contract; "
        if record
        else ""
    )
    return (
        f"the model's answers break the outputs its config.pbtxt declares ({shown}): a model "
        f"error, not a golden; {refused}fix the model (cast or reshape what it returns) or the "
        f"declared data_type/dims in {model.recipe_path or 'its config'}, rebuild, verify"
    )
