"""sha256 of bytes, files and canonical JSON."""

from __future__ import annotations

import contextlib
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


class FileHashCache:
    """sha256 of files, remembered by (path, size, mtime_ns, inode, ctime_ns) across runs, so
    planning does not re-read multi-GB checkpoints that did not change (the approach DVC takes).
    ctime is in the key as in git's index: `cp -p`, `rsync -t` and `tar x` restore mtime after
    rewriting a file, but any write moves ctime, which no user call can set back. Stored as JSON
    beside the build cache. Only regular files are hashed: a FIFO would block and a device such as
    /dev/zero never ends."""

    def __init__(self, path: Path | None):
        self.path = path
        self.entries: dict[str, list] = {}
        self.dirty = False
        if path is not None:
            try:
                self.entries = json.loads(path.read_text())
            except (OSError, ValueError):
                self.entries = {}

    def sha256(self, file: str | os.PathLike) -> str:
        from tritonbuild.core.paths import regular_file

        st = regular_file(file, "input")
        key = os.path.abspath(file)
        stamp = [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]
        hit = self.entries.get(key)
        if isinstance(hit, list) and len(hit) == len(stamp) + 1 and hit[:-1] == stamp:
            return hit[-1]
        digest = sha256_file(file)
        self.entries[key] = [*stamp, digest]
        self.dirty = True
        return digest

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        from tritonbuild.core.fsutil import write_atomic

        with contextlib.suppress(OSError):  # a cache of a cache: never fail a build over it
            write_atomic(self.path, json.dumps(self.entries, sort_keys=True).encode())
        self.dirty = False


_HASHES: dict[Path, FileHashCache] = {}


def file_hashes(cache_dir: Path) -> FileHashCache:
    """The FileHashCache of a build cache directory (its file-hashes.json), one per directory per
    process."""
    path = Path(cache_dir) / "file-hashes.json"
    if path not in _HASHES:
        _HASHES[path] = FileHashCache(path)
    return _HASHES[path]
