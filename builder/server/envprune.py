"""`tritonbuild embedded prune`: the environments tritonbuild made for the embedded server
(`embedded-py3.X-<key>/`, one per Python minor and package set) and the models' imports installed for
another Python (`mirror-py3.X-<key>/`, one per set of pins: server/mirror.py) pile up in the envs
directory as package versions change, and CI caches keep them. Each records its last use (its record
file's mtime, touched by server/toolenv.py when it is used); prune removes those unused for N days,
never one being made (its lock held), and the half-made work directories a killed maker left.

A removed directory is renamed away first, then deleted: a reader sees it whole or not at all."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from tritonbuild.core.fsutil import tree_bytes
from tritonbuild.server.envmake import RECORD

KINDS = ("embedded-py", "mirror-py")
DAY_S = 86_400
# a maker's work directory (envmake: mkdtemp(prefix=f".{name}-")) older than this is left over
STALE_WORK_S = DAY_S


@dataclass(frozen=True)
class Pruned:
    """What prune removed (or would, dry_run), the bytes that frees, and how many it kept."""

    removed: list[str]
    freed_bytes: int
    kept: int


def touch(record: Path) -> None:
    """Marks an environment used now (a read-only cache directory: not marked)."""
    with contextlib.suppress(OSError):
        os.utime(record)


def prune(
    envs: Path, unused_days: float, *, dry_run: bool = False, now: float | None = None
) -> Pruned:
    """Removes from envs the environments and mirrors unused for unused_days, and left-over work
    directories; dry_run: only says which."""
    now = time.time() if now is None else now
    removed, freed, kept = [], 0, 0
    entries = sorted(envs.iterdir()) if envs.is_dir() else []
    for path in entries:
        if not path.is_dir() or path.is_symlink():
            continue
        if path.name.startswith("."):  # a maker's work directory, or a removal cut short
            if now - path.stat().st_mtime < STALE_WORK_S:
                continue
        elif path.name.startswith(KINDS):
            used = _last_used(path)
            if used is not None and now - used < unused_days * DAY_S:
                kept += 1
                continue
        else:
            continue
        size = tree_bytes(path)
        if dry_run or _remove(envs, path):
            removed.append(path.name)
            freed += size
        else:
            kept += 1
    return Pruned(removed, freed, kept)


def _last_used(path: Path) -> float | None:
    """The record's mtime; None for a directory without one (never finished: removable)."""
    try:
        return (path / RECORD).stat().st_mtime
    except OSError:
        return None


def _remove(envs: Path, path: Path) -> bool:
    """Renamed away under its lock (not while a maker holds it), then deleted; False if locked."""
    if path.name.startswith("."):  # left over: nobody holds a lock for it
        _delete(envs, path)
        return True
    try:
        with open(envs / f"{path.name}.lock", "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False
            _delete(envs, path)
            # NOTE: the lock file stays (empty): removed, a maker waiting on it and one opening a
            # new one could both hold "the" lock
            return True
    except OSError:
        return False


def _delete(envs: Path, path: Path) -> None:
    gone = envs / f".pruned-{path.name}-{uuid.uuid4().hex[:8]}"
    path.rename(gone)
    shutil.rmtree(gone, ignore_errors=True)
