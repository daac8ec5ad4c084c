"""Where the local build cache lives, resolved in one place.

The CLI's Application picks the directory once (--cache-dir, else TRITONBUILD_CACHE_DIR, else
$XDG_CACHE_HOME/tritonbuild or ~/.cache/tritonbuild) and api passes it on: to the step store, and to
the planner's PlanContext (the file-hash cache, remote checkpoint downloads), so all land in the
same directory. Nothing reads it from ambient state.
"""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """The directory the environment names (no option given)."""
    env = os.environ.get("TRITONBUILD_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tritonbuild"


def resolve(explicit: Path | str | None = None) -> Path:
    """An explicit directory, else the environment's."""
    return Path(explicit) if explicit is not None else default_cache_dir()
