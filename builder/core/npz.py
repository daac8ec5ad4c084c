"""Deterministic .npz files: sorted members, fixed timestamps, no compression (same arrays → same bytes)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from tritonbuild.core.fsutil import write_atomic


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for key in sorted(arrays):
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(arrays[key]), allow_pickle=False)
            zf.writestr(info, member.getvalue())
    return buf.getvalue()


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    write_atomic(path, npz_bytes(arrays))


def read_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}
