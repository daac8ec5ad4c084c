"""Golden inputs/outputs: generated deterministically, stored as .npz, compared bit for bit."""

from __future__ import annotations

import json
from typing import NamedTuple

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


# A golden file holds the inputs once and, per machine class, the answers and the numerics
# fingerprint of the process that gave them (core/numerics): the first class as input.N.NAME,
# output.N.NAME and 'numerics'; each further class K as class.K.output.N.NAME and class.K.numerics.
# Files written before fingerprints have the first class without 'numerics' (recorded where:
# unknown). A class recorded since 2026-12-06 also holds 'files' (class.K.files): the digests of the
# model's files it was recorded from (config.pbtxt and the version directory's), so that answers
# that differ can be told apart as another build of the model or the same files on another machine.
NUMERICS_MEMBER = "numerics"
FILES_MEMBER = "files"
CLASS_PREFIX = "class."


class GoldenClass(NamedTuple):
    numerics: dict | None  # None: recorded before fingerprints
    outputs: list[Sample]
    files: dict[str, str] | None = None  # model-relative path -> sha256; None: not recorded


class Goldens(NamedTuple):
    inputs: list[Sample]
    classes: list[GoldenClass]  # the first: the file's plain output.N.NAME members


def _fingerprint_array(fp: dict) -> np.ndarray:
    return np.frombuffer(json.dumps(fp, sort_keys=True).encode(), dtype=np.uint8).copy()


def _fingerprint(arr: np.ndarray, member: str = NUMERICS_MEMBER) -> dict:
    try:
        fp = json.loads(np.asarray(arr, dtype=np.uint8).tobytes())
    except (ValueError, TypeError) as e:
        raise ValueError(f"member {member!r} is not a JSON fingerprint ({e})") from None
    if not isinstance(fp, dict):
        raise ValueError(f"member {member!r} is not a JSON object")
    return fp


def _files(arr: np.ndarray | None) -> dict[str, str] | None:
    if arr is None:
        return None
    files = _fingerprint(arr, FILES_MEMBER)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise ValueError(f"member {FILES_MEMBER!r} is not a JSON object of path -> sha256")
    return files


def _samples(arrays: dict[str, np.ndarray], kinds: tuple[str, ...]) -> dict[str, dict[int, Sample]]:
    found: dict[str, dict[int, Sample]] = {kind: {} for kind in kinds}
    for key, arr in arrays.items():
        kind, idx, name = ([*key.split(".", 2), "", ""])[:3]
        if kind not in kinds or not idx.isdigit() or not name:
            raise ValueError(f"member {key!r} is not input.N.NAME or output.N.NAME")
        found[kind].setdefault(int(idx), {})[name] = arr
    return found


def goldens_arrays(goldens: Goldens) -> dict[str, np.ndarray]:
    arrays = {}
    for i, sample_inputs in enumerate(goldens.inputs):
        arrays.update({f"input.{i}.{k}": v for k, v in sample_inputs.items()})
    for k, each in enumerate(goldens.classes):
        prefix = "" if k == 0 else f"{CLASS_PREFIX}{k}."
        for i, sample_outputs in enumerate(each.outputs):
            arrays.update({f"{prefix}output.{i}.{name}": v for name, v in sample_outputs.items()})
        if each.numerics is not None:
            arrays[f"{prefix}{NUMERICS_MEMBER}"] = _fingerprint_array(each.numerics)
        if each.files is not None:
            arrays[f"{prefix}{FILES_MEMBER}"] = _fingerprint_array(each.files)
    return arrays


def read_goldens(arrays: dict[str, np.ndarray]) -> Goldens:
    plain: dict[str, np.ndarray] = {}
    extra: dict[int, dict[str, np.ndarray]] = {}
    for key, arr in arrays.items():
        if key.startswith(CLASS_PREFIX):
            idx, _, rest = key[len(CLASS_PREFIX) :].partition(".")
            if not idx.isdigit() or int(idx) < 1 or not rest:
                raise ValueError(
                    f"member {key!r} is not class.K.output.N.NAME, class.K.numerics or "
                    "class.K.files"
                )
            extra.setdefault(int(idx), {})[rest] = arr
        else:
            plain[key] = arr
    first_fp = plain.pop(NUMERICS_MEMBER, None)
    first_files = _files(plain.pop(FILES_MEMBER, None))
    found = _samples(plain, ("input", "output"))
    inputs, outputs = found["input"], found["output"]
    n = len(inputs)
    if sorted(inputs) != list(range(n)) or not set(outputs) <= set(inputs):
        raise ValueError("sample numbers are not 0..N-1")
    classes = [
        GoldenClass(
            None if first_fp is None else _fingerprint(first_fp),
            [outputs.get(i, {}) for i in range(n)],
            first_files,
        )
    ]
    if sorted(extra) != list(range(1, len(extra) + 1)):
        raise ValueError("machine classes are not numbered 1..K")
    for k in sorted(extra):
        members = dict(extra[k])
        fp = members.pop(NUMERICS_MEMBER, None)
        files = _files(members.pop(FILES_MEMBER, None))
        if fp is None:
            raise ValueError(f"machine class {k} has no {NUMERICS_MEMBER!r} member")
        class_outputs = _samples(members, ("output",))["output"]
        if not set(class_outputs) <= set(range(n)):
            raise ValueError(f"machine class {k}: sample numbers are not 0..N-1")
        outputs_k = [class_outputs.get(i, {}) for i in range(n)]
        classes.append(GoldenClass(_fingerprint(fp), outputs_k, files))
    return Goldens([inputs[i] for i in range(n)], classes)


def to_npz_arrays(inputs: list[Sample], outputs: list[Sample]) -> dict[str, np.ndarray]:
    """One machine class, recorded where: unknown (goldens written by hand or by a test)."""
    if len(inputs) != len(outputs):
        raise ValueError("as many outputs as inputs")
    return goldens_arrays(Goldens(inputs, [GoldenClass(None, outputs)]))


def from_npz_arrays(arrays: dict[str, np.ndarray]) -> tuple[list[Sample], list[Sample]]:
    """The inputs and the first machine class's outputs."""
    goldens = read_goldens(arrays)
    return goldens.inputs, goldens.classes[0].outputs


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
    ulp = (
        int(_ulp_distance(np.ascontiguousarray(expected), np.ascontiguousarray(got))[diff].max())
        if expected.dtype.kind == "f" and expected.dtype.itemsize in (2, 4, 8)
        else None
    )
    return Mismatch(
        sample=sample,
        output=output,
        context=context,
        differing=int(diff.sum()),
        total=int(diff.size),
        max_abs_diff=max_abs,
        first_index=first,
        within_tolerance=within,
        max_ulp=ulp,
    )


def mismatches(
    expected: dict[str, np.ndarray],
    got: dict[str, np.ndarray],
    *,
    sample: int,
    context: str,
    tolerance: dict | None = None,
) -> list[Mismatch]:
    """The one golden-mismatch function: each output of expected that got does not answer bit for
    bit (compare; a missing output is one), in expected's order. tolerance: output → its
    verify.tolerance; a difference within it is marked within_tolerance (the caller keeps or drops
    it)."""
    tolerance = tolerance or {}
    found = []
    for name, exp in expected.items():
        mismatch = compare(
            exp,
            got.get(name),
            sample=sample,
            output=name,
            context=context,
            tolerance=tolerance.get(name),
        )
        if mismatch:
            found.append(mismatch)
    return found


def past_tolerance(found: list[Mismatch]) -> list[Mismatch]:
    """The mismatches no tolerance allows."""
    return [mismatch for mismatch in found if not mismatch.within_tolerance]
