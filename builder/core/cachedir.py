"""Where the local build cache lives: resolved in one place, and scoped to the call that chose it.

The CLI's Application picks the directory once (--cache-dir, else TRITONBUILD_CACHE_DIR, else
$XDG_CACHE_HOME/tritonbuild or ~/.cache/tritonbuild) and api runs each stage inside `using(path)`, so the step
store, the file-hash cache and remote checkpoint downloads all land in the same directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

_CURRENT: ContextVar[Path | None] = ContextVar("tritonbuild_cache_dir", default=None)


def default_cache_dir() -> Path:
    """The directory the environment names (no option given)."""
    env = os.environ.get("TRITONBUILD_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tritonbuild"


def resolve(explicit: Path | str | None = None) -> Path:
    """An explicit directory, else the one in scope, else the environment's."""
    if explicit is not None:
        return Path(explicit)
    return _CURRENT.get() or default_cache_dir()


@contextmanager
def using(path: Path | str | None) -> Iterator[Path]:
    """Run the body with `path` (resolved) as the cache directory of every cache-dir user below."""
    root = resolve(path)
    token = _CURRENT.set(root)
    try:
        yield root
    finally:
        _CURRENT.reset(token)
