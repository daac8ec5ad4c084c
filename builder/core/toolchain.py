"""Toolchain fingerprint: the versions and hardware that decide what a build step produces.

Each step kind keys on the parts it depends on (its backend's `step_toolchain`), so a change
rebuilds exactly the affected steps: a new GPU rebuilds engines, not Python packages. Works with and
without GPUs / TensorRT(-LLM).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from functools import lru_cache
from importlib import metadata

import tritonbuild

# NOTE: the bundled tritonserver prints no version (no --version flag); nvidia-pytriton pins one per
# release.
PYTRITON_TRITONSERVER = {"0.7.0": "2.51.0", "0.6.0": "2.50.0", "0.5.6": "2.49.0"}
# The core's own distributions; a backend's tools come from its `tools` declaration
# (backends/base.py), which the registry hands to declare_tools when the backend is registered.
DISTRIBUTIONS = {
    "numpy": "numpy",
    "tritonclient": "tritonclient",
    "protobuf": "protobuf",
    "nvidia-pytriton": "nvidia-pytriton",
    "tokenizers": "tokenizers",
}
GPU_KEYS = ("cuda", "driver", "gpu_name", "gpu_sm")
# keys fingerprint() finds by probing the machine, not from a distribution's version
PROBED = ("tritonbuild", "python", "tritonserver", "trtexec", *GPU_KEYS)
_DECLARED: dict[str, str] = {}


def declare_tools(tools: dict[str, str]) -> None:
    """Add a backend's tools (toolchain key → distribution) to what fingerprint() reads."""
    new = {key: dist for key, dist in tools.items() if _DECLARED.get(key) != dist}
    if new:
        _DECLARED.update(new)
        fingerprint.cache_clear()


def known_keys() -> set[str]:
    """Every toolchain key fingerprint() can hold: a step keyed on another one would silently leave
    it out."""
    return {*PROBED, *DISTRIBUTIONS, *_DECLARED}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _gpu() -> dict[str, str]:
    """First GPU's name, compute capability and the driver, from nvidia-smi; {} without a GPU."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return {}
    try:
        out = (
            subprocess.run(
                [exe, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=True,
            )
            .stdout.strip()
            .splitlines()
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    if not out:
        return {}
    name, sm, driver = (part.strip() for part in out[0].split(",")[:3])
    return {"gpu_name": name, "gpu_sm": sm, "driver": driver}


def _trtexec() -> str | None:
    exe = shutil.which("trtexec")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    first = next((line for line in out.splitlines() if "TensorRT" in line), "")
    return first.strip() or "present"


@lru_cache(maxsize=1)
def fingerprint() -> dict[str, str]:
    """Everything that shapes our outputs; absent tools are left out, not guessed."""
    fp = {"tritonbuild": tritonbuild.__version__, "python": platform.python_version()}
    for key, dist in {**DISTRIBUTIONS, **_DECLARED}.items():
        v = _version(dist)
        if v:
            fp[key] = v
    pt = fp.get("nvidia-pytriton")
    if pt:
        fp["tritonserver"] = PYTRITON_TRITONSERVER.get(pt, f"unknown (nvidia-pytriton {pt})")
    if os.environ.get("TRITONBUILD_NO_GPU_PROBE") != "1":
        fp.update(_gpu())
    trtexec = _trtexec()
    if trtexec:
        fp["trtexec"] = trtexec
    cuda = os.environ.get("CUDA_VERSION")
    if cuda:
        fp["cuda"] = cuda
    return fp


def for_step(keys: tuple[str, ...] | None, toolchain: dict[str, str]) -> dict[str, str]:
    """The part of the toolchain named by keys (a step kind's dependencies; all of it when None)."""
    if keys is None:
        return dict(toolchain)
    return {k: toolchain[k] for k in keys if k in toolchain}
