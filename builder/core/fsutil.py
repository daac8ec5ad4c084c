"""Atomic writes and directory replacement: no reader ever sees a half-written file or tree."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_writer(path: Path):
    """A binary file that appears at path, complete, only when the block ends without error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def is_temporary(name: str) -> bool:
    """A file atomic_writer has not finished yet."""
    return name.startswith(".") and name.endswith(".tmp")


def write_atomic(path: Path, data: bytes) -> None:
    with atomic_writer(path) as f:
        f.write(data)


def replace_dir(staging: Path, target: Path) -> None:
    """Move a finished staging tree into place; the old tree (if any) is removed only afterwards."""
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
        os.replace(staging, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging, target)
