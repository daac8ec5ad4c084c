"""Paths as manifests and messages show them."""

from __future__ import annotations

import os
from pathlib import Path


def display_path(path: Path) -> str:
    """Relative to the cwd when under it (so manifests do not depend on the checkout's location)."""
    p = path.resolve()
    rel = os.path.relpath(p, Path.cwd())
    return p.as_posix() if rel.startswith("..") else Path(rel).as_posix()
