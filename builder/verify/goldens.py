"""Golden inputs/outputs: generated deterministically, stored as .npz, compared bit for bit."""

from __future__ import annotations

import numpy as np

from tritonbuild.repository.manifest import ManifestModel
from tritonbuild.verify.models import Mismatch

NP_DTYPES = {
    "bool": np.bool_,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "fp16": np.float16,
    "fp32": np.float32,
    "fp64": np.float64,
    "bytes": np.object_,
}

Sample = dict[str, np.ndarray]


def generate_inputs(model: ManifestModel) -> list[Sample]:
    """One request per sample (batch 1 when the model batches), from a seeded generator."""
    spec = model.verify
    rng = np.random.default_rng(spec.seed)
    samples = []
    for i in range(spec.samples):
        sample = {}
        for tensor in model.inputs:
            shape = [spec.dynamic_size if dim == -1 else dim for dim in tensor.dims]
            if model.max_batch_size > 0:
                shape = [1, *shape]
            dtype = NP_DTYPES[tensor.dtype]
            if tensor.dtype == "bytes":
                arr = np.array(
                    [f"sample-{i}-{j}".encode() for j in range(int(np.prod(shape)))],
                    dtype=np.object_,
                ).reshape(shape)
            elif tensor.dtype == "bool":
                arr = rng.integers(0, 2, size=shape).astype(np.bool_)
            elif np.issubdtype(dtype, np.integer):
                arr = rng.integers(spec.int_range[0], spec.int_range[1], size=shape).astype(dtype)
            else:
                arr = rng.random(size=shape, dtype=np.float64).astype(dtype)
            sample[tensor.name] = arr
        samples.append(sample)
    return samples


def to_npz_arrays(inputs: list[Sample], outputs: list[Sample]) -> dict[str, np.ndarray]:
    arrays = {}
    for i, (sample_inputs, sample_outputs) in enumerate(zip(inputs, outputs, strict=True)):
        arrays.update({f"input.{i}.{k}": v for k, v in sample_inputs.items()})
        arrays.update({f"output.{i}.{k}": v for k, v in sample_outputs.items()})
    return arrays


def from_npz_arrays(arrays: dict[str, np.ndarray]) -> tuple[list[Sample], list[Sample]]:
    inputs: dict[int, Sample] = {}
    outputs: dict[int, Sample] = {}
    for key, arr in arrays.items():
        kind, idx, name = ([*key.split(".", 2), "", ""])[:3]
        if kind not in ("input", "output") or not idx.isdigit() or not name:
            raise ValueError(f"member {key!r} is not input.N.NAME or output.N.NAME")
        (inputs if kind == "input" else outputs).setdefault(int(idx), {})[name] = arr
    n = len(inputs)
    if sorted(inputs) != list(range(n)) or not set(outputs) <= set(inputs):
        raise ValueError("sample numbers are not 0..N-1")
    return [inputs[i] for i in range(n)], [outputs.get(i, {}) for i in range(n)]


def check_golden_names(model: ManifestModel, inputs: list[Sample], outputs: list[Sample]) -> None:
    """Goldens that belong to this model: every sample carries its required inputs, only inputs it
    declares (optional ones may be left out, as clients do) and only its outputs."""
    want_in, want_out = (
        {tensor.name for tensor in model.inputs},
        {tensor.name for tensor in model.outputs},
    )
    required = {tensor.name for tensor in model.inputs if not tensor.optional}
    if not inputs:
        raise ValueError("no samples")
    for i, (sample_inputs, sample_outputs) in enumerate(zip(inputs, outputs, strict=False)):
        if not required <= set(sample_inputs) <= want_in:
            raise ValueError(
                f"sample {i} has inputs {sorted(sample_inputs)}, the model takes {sorted(want_in)} "
                f"({sorted(required)} required)"
            )
        if not sample_outputs or not set(sample_outputs) <= want_out:
            raise ValueError(
                f"sample {i} has outputs {sorted(sample_outputs)}, the model gives "
                f"{sorted(want_out)}"
            )


def _ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Units in the last place between floats of one dtype (signed-magnitude → ordered integers)."""
    ints = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    ia, ib = a.view(ints).astype(np.int64), b.view(ints).astype(np.int64)
    top = np.int64(1) << (8 * a.dtype.itemsize - 1)
    ia = np.where(ia < 0, -(ia + top), ia)  # NOTE: negative floats' bit patterns run backwards
    ib = np.where(ib < 0, -(ib + top), ib)
    return np.abs(ia - ib)


def _within(expected: np.ndarray, got: np.ndarray, tol) -> np.ndarray:
    e, g = expected.astype(np.float64), got.astype(np.float64)
    ok = np.abs(g - e) <= tol.atol + tol.rtol * np.abs(e)
    if tol.ulp and expected.dtype.kind == "f":
        ok |= _ulp_distance(np.ascontiguousarray(expected), np.ascontiguousarray(got)) <= tol.ulp
    return ok


def compare(
    expected: np.ndarray, got: np.ndarray, *, sample: int, output: str, context: str, tolerance=None
) -> Mismatch | None:
    """Bit-for-bit: same dtype, same shape, same bytes. Reports what differs and where first. With a
    tolerance (verify.tolerance of this output), bits that differ within it give a Mismatch marked
    within_tolerance."""
    if got is None or expected.dtype != got.dtype or expected.shape != got.shape:
        seen = None if got is None else (got.dtype.str, got.shape)
        return Mismatch(
            sample=sample,
            output=output,
            context=f"{context}: shape/dtype {seen} != {(expected.dtype.str, expected.shape)}",
            differing=int(expected.size),
            total=int(expected.size),
            max_abs_diff=None,
            first_index=None,
        )
    if expected.dtype == np.object_:
        diff = np.array(
            [a != b for a, b in zip(expected.ravel(), got.ravel(), strict=True)]
        ).reshape(expected.shape)
        max_abs = None
    else:
        a = np.ascontiguousarray(expected).view(np.uint8).reshape((*expected.shape, -1))
        b = np.ascontiguousarray(got).view(np.uint8).reshape((*got.shape, -1))
        diff = (a != b).any(axis=-1)
        max_abs = (
            float(np.max(np.abs(expected.astype(np.float64) - got.astype(np.float64))))
            if diff.any()
            else 0.0
        )
    if not diff.any():
        return None
    within = False
    if tolerance is not None and expected.dtype.kind in "fiub":
        bad = diff & ~_within(expected, got, tolerance)
        within = not bad.any()
        diff = diff if within else bad
    first = [int(i) for i in np.argwhere(diff)[0]]
    return Mismatch(
        sample=sample,
        output=output,
        context=context,
        differing=int(diff.sum()),
        total=int(diff.size),
        max_abs_diff=max_abs,
        first_index=first,
        within_tolerance=within,
    )
