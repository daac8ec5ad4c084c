"""Deterministic .npz files: sorted members, fixed timestamps, no compression (same arrays → same
bytes).

Triton's BYTES tensors arrive as numpy object arrays of bytes, which .npy stores only by pickling
(refused here: a golden file must not run code when read). They are stored as a structured array of
(nbytes, data), data zero-padded to the longest element, and read back as the same object array,
every byte kept (trailing NULs and empty elements too)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from tritonbuild.core.fsutil import write_atomic

BYTES_FIELDS = ("nbytes", "data")


def _encode_bytes(arr: np.ndarray) -> np.ndarray:
    items = [
        bytes(x) if isinstance(x, (bytes, bytearray, np.bytes_)) else str(x).encode()
        for x in arr.ravel()
    ]
    width = max([1, *(len(b) for b in items)])
    data = np.zeros((len(items), width), dtype=np.uint8)
    for i, item in enumerate(items):
        data[i, : len(item)] = np.frombuffer(item, dtype=np.uint8)
    flat = np.zeros(len(items), dtype=[(BYTES_FIELDS[0], "<u4"), (BYTES_FIELDS[1], f"S{width}")])
    flat[BYTES_FIELDS[0]] = [len(b) for b in items]
    flat[BYTES_FIELDS[1]] = data.view(f"S{width}").reshape(len(items))
    return flat.reshape(arr.shape)


def _decode_bytes(arr: np.ndarray) -> np.ndarray:
    if arr.dtype.names != BYTES_FIELDS:
        return arr
    flat = arr.reshape(-1)
    width = arr.dtype[BYTES_FIELDS[1]].itemsize
    data = np.ascontiguousarray(flat[BYTES_FIELDS[1]]).view(np.uint8).reshape(len(flat), width)
    out = np.empty(len(flat), dtype=np.object_)
    for i, n in enumerate(flat[BYTES_FIELDS[0]]):
        out[i] = data[i, : int(n)].tobytes()
    return out.reshape(arr.shape)


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for key in sorted(arrays):
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            member = io.BytesIO()
            arr = arrays[key]
            arr = _encode_bytes(arr) if arr.dtype == np.object_ else arr
            np.lib.format.write_array(member, np.ascontiguousarray(arr), allow_pickle=False)
            zf.writestr(info, member.getvalue())
    return buf.getvalue()


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    write_atomic(path, npz_bytes(arrays))


def read_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: _decode_bytes(z[k]) for k in z.files}
