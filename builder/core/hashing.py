"""sha256 of bytes, files and canonical JSON."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

CHUNK = 4 * 1024 * 1024


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    # NOTE: readinto a reused buffer; hashlib releases the GIL for large updates, so this
    # runs at the speed of sha256sum (see benchmarks/).
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def canonical_json(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256_json(obj) -> str:
    return sha256_bytes(canonical_json(obj))


def pretty_json(obj) -> bytes:
    """Deterministic, human-readable JSON (sorted keys, trailing newline)."""
    return (json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()


def tree_files(root: Path) -> list[Path]:
    """Every regular file under root, as sorted relative posix paths (bytecode caches left out)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in filenames:
            out.append((Path(dirpath) / name).relative_to(root))
    return sorted(out, key=lambda p: p.as_posix())
