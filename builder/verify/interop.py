"""A built model's goldens as perf_analyzer `--input-data` JSON: the golden inputs as "data" and the
golden outputs as "validation_data", so perf_analyzer checks every answer while it measures.

The format is perf_analyzer's (src/data_loader.cc ParseData/ReadTensorData, docs/input_data.md; the
facts and their lines are in tests/contracts/facts/perf_analyzer.json): one entry per batch-1
request, shapes without the batch dimension when max_batch_size > 0, tensors as {"b64": ...} of
their little-endian row-major bytes (BYTES: each element a 4-byte little-endian length, then its
bytes). perf_analyzer compares outputs with memcmp, so the check is bit for bit, as ours is.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tritonbuild.core.fsutil import write_atomic
from tritonbuild.core.results import Result
from tritonbuild.errors import UsageError, VerifyError
from tritonbuild.repository.manifest import ManifestModel, newest_version
from tritonbuild.verify.goldens import NP_DTYPES, Sample


def encode_tensor(arr: np.ndarray, dtype: str) -> str:
    """perf_analyzer's raw bytes of one tensor, base64: little-endian row-major; BYTES
    length-prefixed."""
    if dtype == "bytes":
        parts = []
        for element in np.asarray(arr, dtype=np.object_).reshape(-1):
            raw = element.encode() if isinstance(element, str) else bytes(element)
            parts += [len(raw).to_bytes(4, "little"), raw]
        return base64.b64encode(b"".join(parts)).decode("ascii")
    want = np.dtype(NP_DTYPES[dtype]).newbyteorder("<")
    return base64.b64encode(np.ascontiguousarray(arr, dtype=want).tobytes(order="C")).decode(
        "ascii"
    )


def _rows(arr: np.ndarray, batched: bool) -> list[np.ndarray]:
    """The batch-1 pieces of one golden tensor (the whole tensor when the model does not batch)."""
    return [arr[r] for r in range(arr.shape[0])] if batched else [arr]


def _validation_refusal(model: ManifestModel, outputs: list[Sample]) -> str | None:
    """Why perf_analyzer cannot check this model's answers from the goldens, or None."""
    variable = [t.name for t in model.outputs if any(dim == -1 for dim in t.dims)]
    if variable:
        return (
            f"output {', '.join(variable)} has a variable dimension: perf_analyzer checks an "
            "output only against the shape the model declares, never one given in the file"
        )
    names = {t.name for t in model.outputs}
    for i, sample in enumerate(outputs):
        if set(sample) != names:
            return (
                f"golden sample {i} holds outputs {sorted(sample)}, not all of {sorted(names)}: "
                "perf_analyzer needs every output of the model in each validation entry"
            )
    return None


def _entries(
    model: ManifestModel, samples: list[Sample], tensors, with_shape: bool
) -> list[list[dict]]:
    """Per sample, its batch-1 requests: {tensor name: {"content": {"b64"}, "shape"} or {"b64"}}."""
    batched = model.max_batch_size > 0
    out = []
    for i, sample in enumerate(samples):
        rows = {
            t.name: _rows(np.asarray(sample[t.name]), batched) for t in tensors if t.name in sample
        }
        counts = {len(r) for r in rows.values()}
        if len(counts) != 1:
            raise VerifyError(
                f"golden sample {i} of {model.name} has tensors of different batch sizes",
                where=model.goldens,
                hint="record the goldens again with 'tritonbuild verify --record'",
            )
        requests = []
        for r in range(counts.pop()):
            entry = {}
            for t in tensors:
                if t.name not in rows:
                    continue
                row, data = rows[t.name][r], {"b64": encode_tensor(rows[t.name][r], t.dtype)}
                entry[t.name] = {"content": data, "shape": list(row.shape)} if with_shape else data
            requests.append(entry)
        out.append(requests)
    return out


def _model(root: Path, model: str) -> ManifestModel:
    return newest_version(root, model)


def _goldens(root: Path, spec: ManifestModel) -> tuple[list[Sample], list[Sample]]:
    from tritonbuild.core.npz import read_npz
    from tritonbuild.verify.goldens import check_golden_names, from_npz_arrays

    if not spec.goldens or not (root / spec.goldens).is_file():
        raise UsageError(
            f"{spec.name} has no goldens in {root}: there is nothing to export",
            where=str(root / spec.name),
            hint=f"record them with 'tritonbuild verify {root} --record', then export again",
        )
    try:
        inputs, outputs = from_npz_arrays(read_npz(root / spec.goldens))
        check_golden_names(spec, inputs, outputs)
    except (OSError, ValueError) as e:
        raise VerifyError(
            f"golden file of {spec.name} is unusable: {e}",
            where=str(root / spec.goldens),
            hint=f"record the goldens again with 'tritonbuild verify {root} --record --force'",
        ) from None
    return inputs, outputs


def perf_analyzer_data(root: Path, model: str, *, validation: bool = True) -> tuple[dict, dict]:
    """(the --input-data document, a summary) for MODEL's goldens in the built repository ROOT."""
    spec = _model(root, model)
    inputs, outputs = _goldens(root, spec)
    refusal = _validation_refusal(spec, outputs) if validation else None
    if refusal:
        raise UsageError(
            f"{model}: cannot export validation data: {refusal}",
            where=str(root / spec.goldens),
            hint="export the inputs alone with --no-validation",
        )
    data = _entries(spec, inputs, spec.inputs, with_shape=True)
    document = {"data": [request for sample in data for request in sample]}
    if validation:
        expected = _entries(spec, outputs, spec.outputs, with_shape=False)
        if [len(s) for s in expected] != [len(s) for s in data]:
            raise VerifyError(
                f"{model}: golden outputs do not have the batch sizes of their inputs",
                where=str(root / spec.goldens),
                hint="record the goldens again",
            )
        document["validation_data"] = [request for sample in expected for request in sample]
    summary = {
        "model": model,
        "version": spec.version,
        "samples": len(inputs),
        "requests": len(document["data"]),
        "validation": validation,
        "goldens": spec.goldens,
        "max_batch_size": spec.max_batch_size,
        "perf_analyzer": f"perf_analyzer -m {model} --input-data FILE"
        + (" -b 1" if spec.max_batch_size > 0 else ""),
    }
    return document, summary


@dataclass(frozen=True)
class PerfDataExport(Result):
    """export perf-data: what was written where, and the perf_analyzer command line that reads
    it."""

    model: str
    version: int
    samples: int
    requests: int
    validation: bool
    goldens: str
    max_batch_size: int
    perf_analyzer: str
    path: str


def write_perf_data(
    root: Path, model: str, out: Path, *, validation: bool = True
) -> PerfDataExport:
    """perf_analyzer_data written to OUT (atomically); the summary with OUT in its command line."""
    document, summary = perf_analyzer_data(root, model, validation=validation)
    write_atomic(out, (json.dumps(document, indent=1) + "\n").encode())
    return PerfDataExport(
        **{
            **summary,
            "path": str(out),
            "perf_analyzer": summary["perf_analyzer"].replace("FILE", str(out)),
        }
    )
