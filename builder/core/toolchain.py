"""Toolchain fingerprint: the versions that decide what a build produces (part of every cache key)."""

from __future__ import annotations

import platform
from functools import lru_cache
from importlib import metadata

import builder

# NOTE: the bundled tritonserver prints no version (no --version flag); nvidia-pytriton pins one per release.
PYTRITON_TRITONSERVER = {"0.7.0": "2.51.0", "0.6.0": "2.50.0", "0.5.6": "2.49.0"}
DISTRIBUTIONS = ("numpy", "onnx", "onnxruntime", "torch", "tritonclient", "protobuf", "nvidia-pytriton")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def fingerprint() -> dict[str, str]:
    """Versions of everything that shapes our outputs; absent tools are left out, not guessed."""
    fp = {"tritonbuild": builder.__version__, "python": platform.python_version()}
    for dist in DISTRIBUTIONS:
        v = _version(dist)
        if v:
            fp[dist] = v
    pt = fp.get("nvidia-pytriton")
    if pt:
        fp["tritonserver"] = PYTRITON_TRITONSERVER.get(pt, f"unknown (nvidia-pytriton {pt})")
    return fp
