"""Paths as manifests and messages show them; paths named by users, proven safe: inside their root
after resolving symlinks, regular files read with a cap."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def display_path(path: Path) -> str:
    """Relative to the cwd when under it (so manifests do not depend on the checkout's location)."""
    absolute = path.resolve()
    rel = os.path.relpath(absolute, Path.cwd())
    return absolute.as_posix() if rel.startswith("..") else Path(rel).as_posix()


class PathProblem(ValueError):
    """A path that must not be read or written; the message says why."""


def resolved(path: str | os.PathLike) -> Path:
    """The absolute path with every symlink resolved (missing tails kept as written)."""
    try:
        return Path(os.path.realpath(os.fspath(path)))
    except (OSError, ValueError) as e:
        raise PathProblem(f"{os.fspath(path)!r} cannot be resolved: {e}") from None


def is_inside(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """path is root or below it, both after resolving symlinks."""
    real_path, real_root = resolved(path), resolved(root)
    return real_path == real_root or real_root in real_path.parents


def inside(root: str | os.PathLike, rel: str | os.PathLike, what: str = "path") -> Path:
    """root/rel, proven to stay inside root after resolving symlinks (an absolute rel, '..' or a
    symlink that leaves root is refused)."""
    text = os.fspath(rel)
    if "\0" in text:
        raise PathProblem(f"{what} {text!r} contains a NUL byte")
    if os.path.isabs(text):
        raise PathProblem(f"{what} {text!r} is absolute; it must be relative to {root}")
    path = Path(root) / text
    if not is_inside(path, root):
        raise PathProblem(f"{what} {text!r} leaves {root} (after resolving '..' and symlinks)")
    return path


def overlaps(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """a and b are the same path, or one holds the other (after resolving symlinks)."""
    ra, rb = resolved(a), resolved(b)
    return ra == rb or ra in rb.parents or rb in ra.parents


def contains(outer: str | os.PathLike, inner: str | os.PathLike) -> bool:
    """inner is outer or below it (after resolving symlinks)."""
    ro, ri = resolved(outer), resolved(inner)
    return ro == ri or ro in ri.parents


def regular_file(path: str | os.PathLike, what: str = "file") -> os.stat_result:
    """stat of a regular file; a FIFO, device, socket, directory or symlink loop is refused without
    opening it (opening a FIFO blocks until a writer comes; /dev/zero never ends)."""
    try:
        st = os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise PathProblem(f"{what} {os.fspath(path)} is a symlink loop") from None
        raise
    if not stat.S_ISREG(st.st_mode):
        raise PathProblem(f"{what} {os.fspath(path)} is not a regular file ({kind_of(st.st_mode)})")
    return st


def kind_of(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symlink"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: str | os.PathLike, max_bytes: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most max_bytes, never blocking on a FIFO or reading a
    device."""
    regular_file(path, what)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)  # NOTE: the path may have been swapped for a FIFO between stat and open
        if not stat.S_ISREG(st.st_mode):
            raise PathProblem(
                f"{what} {os.fspath(path)} is not a regular file ({kind_of(st.st_mode)})"
            )
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise PathProblem(f"{what} {os.fspath(path)} is larger than {max_bytes} bytes")
    return data


def tree_root_for_links(root: Path) -> Path:
    """Where symlinks in an input tree may point: the tree itself, or for a Hugging Face hub
    snapshot (<repo>/snapshots/<rev>/, whose files are links to <repo>/blobs/) the hub's repository
    directory."""
    real_root = resolved(root)
    return real_root.parent.parent if real_root.parent.name == "snapshots" else real_root


def check_tree(root: Path, rels: list[Path]) -> None:
    """Every file of an input tree is a regular file, and a symlink among them stays inside the tree
    (see tree_root_for_links)."""
    allowed = tree_root_for_links(root)
    for rel in rels:
        path = root / rel
        if path.is_symlink() and not is_inside(path, allowed):
            raise PathProblem(f"{path} is a symlink to {resolved(path)}, outside {root}")
        regular_file(path, "input")
