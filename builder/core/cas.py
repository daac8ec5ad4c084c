"""Content-addressed store: blobs by sha256 and step records by cache key, fanned out as
key[:2]/key."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from tritonbuild.core.cachedir import default_cache_dir
from tritonbuild.core.fsutil import tree_bytes, write_atomic
from tritonbuild.core.hashing import CHUNK, pretty_json

__all__ = ["FileEntry", "Store", "clone_or_copy", "default_cache_dir"]

HASH_ON_HIT_MAX = (
    64 << 20
)  # blobs up to this size are re-hashed on every cache hit; larger ones are linked
FICLONE = 0x40049409  # ioctl: reflink (copy-on-write clone) on btrfs/xfs


def _reflink(src: Path, dest: Path) -> bool:
    import fcntl

    try:
        with open(src, "rb") as s, open(dest, "wb") as d:
            fcntl.ioctl(d.fileno(), FICLONE, s.fileno())
        return True
    except OSError:
        dest.unlink(missing_ok=True)
        return False


def clone_or_copy(src: Path, dest: Path) -> str:
    """Copy a file, as a reflink (copy-on-write: no bytes written) where the filesystem has them;
    returns how."""
    if _reflink(src, dest):
        return "reflink"
    shutil.copyfile(src, dest)
    return "copy"


class FileEntry(BaseModel):
    """A file by content: its blob's sha256 and its size (in build results, manifests and target
    manifests)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    sha256: str
    size: int


class Store:
    def __init__(self, root: Path):
        self.root = root

    @contextmanager
    def lock(self, shared: bool):
        """flock on <cache>/lock: builds hold it shared (many at once), gc exclusive, so gc never
        deletes a blob a running build has written but not yet recorded or materialised. Waits for
        the holders."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(
                self.root / "lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644
            )
        except OSError:
            if not shared:
                raise
            yield  # an unwritable cache: the build falls back to a private temporary store, nothing to guard
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def blob_path(self, digest: str) -> Path:
        return self.root / "blobs" / digest[:2] / digest

    def record_path(self, key: str) -> Path:
        return self.root / "steps" / key[:2] / f"{key}.json"

    def put_file(self, src: Path, move: bool = False) -> tuple[str, int]:
        """Copy src into the store while hashing it; returns (sha256, size). move: src is a file of
        ours (a step's output in its workdir under the store's tmp/): hashed, then renamed into
        place, never copied, so a multi-GB step output takes its size once on disk."""
        if move:
            moved = self._move_in(src)
            if moved is not None:
                return moved
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
                out.flush()
                os.fsync(out.fileno())
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

    def _move_in(self, src: Path) -> tuple[str, int] | None:
        """put_file's move: None where src cannot be renamed into the store (another filesystem, a
        link)."""
        if (
            src.is_symlink() or not src.is_file() or src.stat().st_nlink > 1
        ):  # a link to a file not ours: copy
            return None
        h, size = hashlib.sha256(), 0
        with open(src, "rb+") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
                size += len(chunk)
            os.fsync(f.fileno())
        digest = h.hexdigest()
        dest = self.blob_path(digest)
        if dest.exists() and dest.stat().st_size == size:
            return digest, size
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(src, 0o444)
        try:
            os.replace(src, dest)
        except OSError:
            os.chmod(src, 0o644)
            return None
        return digest, size

    def get_record(self, key: str) -> dict | None:
        """A step record whose blobs are intact (sizes; and sha256 for blobs up to HASH_ON_HIT_MAX),
        else None. A damaged entry is evicted so that the step is rebuilt."""
        try:
            record = json.loads(self.record_path(key).read_text())
        except (OSError, ValueError):
            return None
        for entry in record.get("files", {}).values():
            blob = self.blob_path(entry["sha256"])
            ok = blob.is_file() and blob.stat().st_size == entry["size"]
            if ok and entry["size"] <= HASH_ON_HIT_MAX:
                from tritonbuild.core.hashing import sha256_file

                ok = sha256_file(blob) == entry["sha256"]
            if not ok:
                self.evict(key, record)
                return None
        os.utime(self.record_path(key))  # last use, for gc's least-recently-used order
        return record

    def evict(self, key: str, record: dict | None = None) -> None:
        """Drop a record and its damaged blobs (a blob whose bytes no longer match its name)."""
        from tritonbuild.core.hashing import sha256_file

        record = record or self.read_record(key) or {}
        for entry in record.get("files", {}).values():
            blob = self.blob_path(entry["sha256"])
            if blob.is_file() and (
                blob.stat().st_size != entry["size"] or sha256_file(blob) != entry["sha256"]
            ):
                blob.unlink(missing_ok=True)
        self.record_path(key).unlink(missing_ok=True)

    def put_record(self, key: str, record: dict) -> None:
        write_atomic(self.record_path(key), pretty_json(record))

    def read_record(self, key: str) -> dict | None:
        try:
            return json.loads(self.record_path(key).read_text())
        except (OSError, ValueError):
            return None

    def _index_path(self, model: str, kind: str) -> Path:
        return self.root / "index" / model / f"{kind}.json"

    def put_index(self, model: str, kind: str, key: str) -> None:
        """The last key built for (model, step kind): lets a rebuild say what changed."""
        write_atomic(self._index_path(model, kind), pretty_json({"key": key}))

    def get_index(self, model: str, kind: str) -> str | None:
        try:
            return json.loads(self._index_path(model, kind).read_text())["key"]
        except (OSError, ValueError, KeyError):
            return None

    def materialize(self, digest: str, dest: Path) -> str:
        """Put a blob at dest without corrupting the store when dest is edited later: a reflink
        (copy-on-write) where the filesystem has them; else a hardlink to the read-only blob for
        large files (a metadata-only assemble of multi-GB engines); else a copy. Returns how:
        'reflink', 'hardlink' or 'copy'."""
        src = self.blob_path(digest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.unlink(missing_ok=True)
        if _reflink(src, dest):
            os.chmod(dest, 0o644)
            return "reflink"
        if src.stat().st_size > HASH_ON_HIT_MAX:
            try:
                os.link(src, dest)
                return "hardlink"
            except OSError:
                pass
        shutil.copyfile(src, dest)
        os.chmod(dest, 0o644)
        return "copy"

    # --- maintenance: ls, gc, verify --------------------------------------------------------------

    def records(self) -> list[tuple[str, dict, float]]:
        out = []
        for record_file in sorted((self.root / "steps").glob("*/*.json")):
            try:
                out.append(
                    (
                        record_file.stem,
                        json.loads(record_file.read_text()),
                        record_file.stat().st_mtime,
                    )
                )
            except (OSError, ValueError):
                continue
        return out

    def blobs(self) -> list[Path]:
        return sorted((self.root / "blobs").glob("*/*"))

    def gc(self, max_bytes: int) -> dict:
        """Evict least-recently-used records until the blobs they keep fit in max_bytes; drop
        unreferenced blobs and leftovers of interrupted writes. Waits for running builds (the cache
        lock)."""
        with self.lock(shared=False):
            return self._gc(max_bytes)

    def _gc(self, max_bytes: int) -> dict:
        recs = sorted(self.records(), key=lambda row: row[2], reverse=True)  # newest first
        kept, size, evicted, full, keys = set(), 0, [], False, set()
        removed = {"blobs": 0, "records": 0, "logs": 0, "io": 0, "index": 0}
        for key, record, _mtime in recs:
            digests = {entry["sha256"]: entry["size"] for entry in record.get("files", {}).values()}
            extra = sum(sz for digest, sz in digests.items() if digest not in kept)
            full = (
                full or size + extra > max_bytes
            )  # strict LRU: once one does not fit, everything older goes
            if not full:
                kept |= set(digests)
                size += extra
                keys.add(key)
            else:
                removed["records"] += _remove(self.record_path(key))
                evicted.append(key)
        for blob in self.blobs():
            if blob.name not in kept:
                removed["blobs"] += _remove(blob)
        removed.update(self._prune_beside(keys))
        _remove(self.root / "tmp")
        return {
            "evicted_records": evicted,
            "freed_bytes": sum(removed.values()),
            "removed_bytes": removed,
            "kept_records": len(keys),
            "kept_blob_bytes": size,
            "kept_bytes": tree_bytes(self.root),
        }

    def _prune_beside(self, keys: set[str]) -> dict[str, int]:
        """What lives beside the kept records, for evicted ones: step logs (logs/<key[:16]>),
        derived-I/O memos (io/, each naming the step keys it was derived from; one that names none
        predates that and goes) and the last-built index (index/<model>/<kind>.json → a key)."""
        removed = {"logs": 0, "io": 0, "index": 0}
        prefixes = {key[:16] for key in keys}
        for log_dir in sorted((self.root / "logs").glob("*")):
            if log_dir.name not in prefixes:
                removed["logs"] += _remove(log_dir)
        for memo in sorted((self.root / "io").glob("*/*.json")):
            try:
                steps = json.loads(memo.read_text()).get("steps")
            except (OSError, ValueError, AttributeError):
                steps = None
            if steps is None or not set(steps) <= keys:
                removed["io"] += _remove(memo)
        for entry in sorted((self.root / "index").glob("*/*.json")):
            try:
                key = json.loads(entry.read_text()).get("key")
            except (OSError, ValueError, AttributeError):
                key = None
            if key not in keys:
                removed["index"] += _remove(entry)
        return removed

    def verify(self) -> dict:
        """Re-hash every blob; a corrupt blob is deleted and every record using it evicted. Waits
        for running builds (the cache lock), like gc."""
        with self.lock(shared=False):
            return self._verify()

    def _verify(self) -> dict:
        from tritonbuild.core.hashing import sha256_file

        bad = [b.name for b in self.blobs() if sha256_file(b) != b.name]
        for name in bad:
            self.blob_path(name).unlink(missing_ok=True)
        evicted = [
            key
            for key, record, _ in self.records()
            if any(e["sha256"] in bad for e in record.get("files", {}).values())
        ]
        for key in evicted:
            self.record_path(key).unlink(missing_ok=True)
        return {
            "blobs_checked": len(self.blobs()) + len(bad),
            "corrupt_blobs": bad,
            "evicted_records": evicted,
        }


def _remove(path: Path) -> int:
    """Remove a file or a tree; the bytes it held (0 when it was already gone)."""
    try:
        if path.is_dir() and not path.is_symlink():
            size = tree_bytes(path)
            shutil.rmtree(path, ignore_errors=True)
            return size
        size = path.stat().st_size
        path.unlink()
        return size
    except OSError:
        return 0
