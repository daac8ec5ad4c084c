"""The numerics of a server's Python side (core/numerics): the portable-numerics variables a
repository's models need set before the stubs load their math libraries, and the fingerprint the
stubs' interpreter reads with the server's environment."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from tritonbuild.core import numerics as numerics_module
from tritonbuild.core.fsutil import write_atomic
from tritonbuild.core.stores import is_url
from tritonbuild.repository.manifest import MANIFEST_NAME, Manifest, numerics_env
from tritonbuild.server.toolenv import STUB_PATH_VAR

# What, besides the interpreter, its installs and the machine, can change a Python side's reading:
# the math libraries' own variables (caps, threads, paths: core/numerics.NUMERICS_VARS and their
# families) and where the interpreter finds packages and libraries. Nothing else of the server's
# environment (a test's name, a cache directory) makes a new reading.
_DECIDING_VARS = (
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    STUB_PATH_VAR,
)
_DECIDING_PREFIXES = (
    "MKL_",
    "OMP_",
    "KMP_",
    "GOMP_",
    "ATEN_",
    "ONEDNN_",
    "DNNL_",
    "OPENBLAS_",
    "GOTO",
    "NPY_",
    "TORCH_",
    "PYTORCH_",
    "ORT_",
    "CUDA_",
)
# What an install, upgrade or removal leaves in a directory on the interpreter's path
_INSTALLS = (".dist-info", ".egg-info", ".egg-link", ".pth")


def manifest_numerics(repository: str) -> dict[str, str]:
    """A local repository's portable numerics (repository/manifest.numerics_env over its manifest's
    models), which the server's Python side runs with wherever it serves them, as the serving
    image's entrypoint sets them. A repository without a readable manifest: none."""
    path = Path(repository) / MANIFEST_NAME
    if is_url(repository) or not path.is_file():
        return {}
    try:
        manifest = Manifest.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return numerics_env(manifest.models)


def server_numerics(server) -> Callable[[], dict | None]:
    """The fingerprint of a started EmbeddedServer's Python side, read by its stub's interpreter
    started as the stub is (isolated, the server's environment), so the same libraries load with
    the same variables. Started now, in the background (importing torch takes seconds: verify
    loads the models meanwhile); the function returned waits for it. Its answer is None where the
    install's own Python runs (a --tritonserver install or container: not known here) or the
    reading fails. A reading is kept in the tool environment (numerics/<key>.json) under a key of
    everything that can change it (reading_key): the next server of the same kind answers from
    it, no interpreter started."""
    if not server.launcher.bundled or server.started_env is None:
        return lambda: None
    python = server.launcher.tool_env()
    record = _record_path(python, server.started_env)
    if record is not None:
        try:
            known = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
        else:
            return lambda: known
    try:
        proc = subprocess.Popen(
            [str(python.interpreter), "-I", numerics_module.__file__],
            env=server.started_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    except OSError:
        return lambda: None

    def answer() -> dict | None:
        try:
            out, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return None
        try:
            reading = json.loads(out.strip().splitlines()[-1]) if proc.returncode == 0 else None
        except (ValueError, IndexError):
            return None
        if isinstance(reading, dict) and record is not None:
            # a read-only environment: read again next time
            with contextlib.suppress(OSError):
                write_atomic(record, json.dumps(reading, sort_keys=True).encode())
        return reading

    return answer


def reading_key(interpreter: Path, env: dict, site_packages: Path) -> str:
    """A digest of everything that can change the fingerprint an interpreter reads with env: the
    reader's code, the interpreter (resolved, its size and time), the deciding variables, what is
    installed where it imports from (its environment's site-packages and the directories env puts
    on its path: the names of installs, which carry versions, and the .pth files' lines) and the
    machine (CPU model and ISA, CPUs this process may use, the GPU driver and GPUs). OSError when
    one cannot be read."""
    digest = hashlib.sha256(Path(numerics_module.__file__).read_bytes())

    def add(*parts: object) -> None:
        for part in parts:
            digest.update(str(part).encode() + b"\0")

    resolved = interpreter.resolve()
    stat = resolved.stat()
    add(resolved, stat.st_size, stat.st_mtime_ns)
    for var in sorted(env):
        if var in _DECIDING_VARS or var.startswith(_DECIDING_PREFIXES):
            add(var, env[var])
    paths = [str(site_packages)]
    for var in (STUB_PATH_VAR, "PYTHONPATH"):
        paths += [p for p in env.get(var, "").split(os.pathsep) if p]
    for directory in dict.fromkeys(paths):
        add(directory)
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            if name.endswith(_INSTALLS):
                add(name)
                if name.endswith(".pth"):
                    add(Path(directory, name).read_text(encoding="utf-8", errors="replace"))
    add(json.dumps(numerics_module.cpu(), sort_keys=True), os.cpu_count())
    add(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "")
    for name in [
        "/proc/driver/nvidia/version",
        *sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")),
    ]:
        if os.path.isfile(name):
            add(Path(name).read_text(encoding="utf-8", errors="replace"))
    return digest.hexdigest()[:32]


def _record_path(python, env: dict) -> Path | None:
    """Where a reading under env is kept in the tool environment; None where its key cannot be
    read (then every server reads anew)."""
    try:
        key = reading_key(python.interpreter, env, python.site_packages)
    except OSError:
        return None
    return python.path / "numerics" / f"{key}.json"
