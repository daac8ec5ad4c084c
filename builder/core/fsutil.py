"""Atomic writes and directory replacement: no reader ever sees a half-written file or tree."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_writer(path: Path, tmp_dir: Path | None = None):
    """A binary file that appears at path, complete, only when the block ends without error. tmp_dir
    (same filesystem) holds the temporary meanwhile, where a reader of path's directory never sees
    it; by default it is path's own directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=tmp_dir or path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(
                f.fileno()
            )  # NOTE: data on disk before the rename makes it visible (a crash leaves old or new)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def is_temporary(name: str) -> bool:
    """A file atomic_writer has not finished yet."""
    return name.startswith(".") and name.endswith(".tmp")


def write_atomic(path: Path, data: bytes, tmp_dir: Path | None = None) -> None:
    with atomic_writer(path, tmp_dir) as f:
        f.write(data)


def tree_bytes(path: Path) -> int:
    """Bytes the regular files under path take (symlinks not followed, a file gone meanwhile
    skipped)."""
    total = 0
    for dirpath, _dirnames, filenames in os.walk(path):
        for name in filenames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if not os.path.islink(os.path.join(dirpath, name)):
                total += st.st_size
    return total


def fsync_tree(root: Path) -> None:
    """Flush every file and directory under root to disk (before a rename publishes the tree)."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(dirpath))


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the files themselves are flushed
    finally:
        os.close(fd)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2  # <linux/fs.h>


def _renameat2():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2  # glibc >= 2.28
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths (renameat2 RENAME_EXCHANGE); False where the OS or
    filesystem cannot."""
    fn = _renameat2()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
        return False  # e.g. a filesystem without RENAME_EXCHANGE support (some network and FUSE filesystems)
    raise OSError(err, os.strerror(err), str(b))


def replace_dir(staging: Path, target: Path) -> None:
    """Move a finished staging tree into place; the old tree (if any) is removed only afterwards.

    On Linux the two trees are exchanged in one renameat2(RENAME_EXCHANGE) call, so a Triton polling
    target never sees it missing. Elsewhere (or on a filesystem that refuses the flag) the fallback
    is two renames, with a moment in between when target does not exist: POSIX has no portable
    atomic exchange of directories, and a plain rename cannot replace a non-empty directory."""
    fsync_tree(staging)
    if target.exists() and not target.is_symlink():
        if exchange(staging, target):
            old = staging  # staging now holds the previous tree
        else:
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            os.replace(target, old)
            os.replace(staging, target)
        fsync_dir(target.parent)
        shutil.rmtree(old, ignore_errors=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging, target)
        fsync_dir(target.parent)


def remove_bytecode(root: Path) -> None:
    """The Python backend writes __pycache__/ next to a repository's model.py files; what verifies a
    repository leaves it as it found it."""
    for d in root.glob("*/*/**/__pycache__"):
        shutil.rmtree(d, ignore_errors=True)
