"""Content-addressed store: blobs by sha256 and step records by cache key, fanned out as key[:2]/key."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from builder.core.fsutil import write_atomic
from builder.core.hashing import CHUNK, pretty_json


def default_cache_dir() -> Path:
    env = os.environ.get("TRITONBUILD_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tritonbuild"


class Store:
    def __init__(self, root: Path):
        self.root = root

    def blob_path(self, digest: str) -> Path:
        return self.root / "blobs" / digest[:2] / digest

    def record_path(self, key: str) -> Path:
        return self.root / "steps" / key[:2] / f"{key}.json"

    def put_file(self, src: Path) -> tuple[str, int]:
        """Copy src into the store while hashing it; returns (sha256, size)."""
        tmp_dir = self.root / "tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=tmp_dir)
        h, size = hashlib.sha256(), 0
        try:
            with open(src, "rb") as f, os.fdopen(fd, "wb") as out:
                while chunk := f.read(CHUNK):
                    h.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
            digest = h.hexdigest()
            dest = self.blob_path(digest)
            if dest.exists() and dest.stat().st_size == size:
                os.unlink(tmp)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.chmod(tmp, 0o444)
                os.replace(tmp, dest)
            return digest, size
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get_record(self, key: str) -> dict | None:
        """A step record whose blobs are all present with the recorded sizes; otherwise None (a miss)."""
        try:
            record = json.loads(self.record_path(key).read_text())
        except (OSError, ValueError):
            return None
        for entry in record.get("files", {}).values():
            p = self.blob_path(entry["sha256"])
            if not p.is_file() or p.stat().st_size != entry["size"]:
                return None
        return record

    def put_record(self, key: str, record: dict) -> None:
        write_atomic(self.record_path(key), pretty_json(record))

    def materialize(self, digest: str, dest: Path) -> None:
        """Copy a blob out (a copy, never a link: editing the repository must not corrupt the store)."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.blob_path(digest), dest)
        os.chmod(dest, 0o644)
