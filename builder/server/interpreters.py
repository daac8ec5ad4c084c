"""Which Python interpreter the embedded tritonserver's Python side runs on (server/toolenv.py makes
its environment from it).

Without a target: this interpreter when it is Python 3.10-3.12, else (3.13: numpy < 2 has no wheel
there) TRITONBUILD_EMBEDDED_PYTHON or a python3.12/3.11/3.10 found on PATH or under pyenv. With a
target minor (the Python of the image the repository is served by, server/target.py): only
interpreters of that minor, found the same way; TRITONBUILD_EMBEDDED_PYTHON, when set, is used
whatever its minor (an explicit choice: the verify report shows the mismatch).

Each candidate is asked by running it (-I); a binary's answer is kept in <envs>/interpreters.json
under its resolved path with the file's identity (device, inode, size, mtime, ctime), and asked
again once the file is replaced or rewritten; a script (a pyenv shim) is run every time.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tritonbuild.core.fsutil import write_atomic
from tritonbuild.errors import ServerStartError

# numpy < 2 has wheels for these; the bundled stubs cover 3.8-3.13
PYTHONS = ((3, 12), (3, 11), (3, 10))
PROBES = "interpreters.json"  # in the envs directory: what each candidate said about itself
CHOSEN_VAR = "TRITONBUILD_EMBEDDED_PYTHON"


def _probe(python: str, known: dict) -> tuple[str, str] | None:
    """(minor, libdir) of a working interpreter whose minor numpy < 2 serves and that has a shared
    libpython (the stub links it); None otherwise (a pyenv shim for a version not selected exits
    non-zero). What a binary said about itself is reused while the binary is the same file (known:
    PROBES' entries, updated here)."""
    identity = _identity(python)
    facts = known.get(identity[0]) if identity else None
    if not (
        isinstance(facts, dict)
        and facts.get("identity") == identity[1]
        and isinstance(facts.get("minor"), str)
        and isinstance(facts.get("libdir"), str)
    ):
        facts = _ask(python)
        if facts is None:
            return None  # not cached: a failure may be passing (a timeout, a busy disk)
        if identity:
            known[identity[0]] = {**facts, "identity": identity[1]}  # written once by find_python
    served = {f"{major}.{minor}" for major, minor in PYTHONS}
    if facts.get("minor") not in served or not facts.get("shared"):
        return None
    return facts["minor"], facts["libdir"]


def _ask(python: str) -> dict | None:
    """The interpreter's own answer (-I: PYTHON* variables and user site do not change it), None if
    it fails."""
    code = (
        "import sys, sysconfig; print('%d.%d' % sys.version_info[:2]); "
        "print(sysconfig.get_config_var('LIBDIR') or ''); "
        "print(int(bool(sysconfig.get_config_var('Py_ENABLE_SHARED'))))"
    )
    try:
        out = subprocess.run(
            [python, "-I", "-c", code], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    minor, libdir, shared = [*out.splitlines(), "", "", ""][:3]
    return {"minor": minor, "libdir": libdir, "shared": shared == "1"}


def _identity(python: str) -> tuple[str, list[int]] | None:
    """The resolved binary and what changes when it is replaced or rewritten (device, inode, size,
    mtime, ctime); None for a script: a pyenv shim picks its interpreter at each run (PYENV_VERSION,
    .python-version), so its answer is not the file's and it is run every time."""
    resolved = os.path.realpath(shutil.which(python) or python)
    try:
        with open(resolved, "rb") as handle:
            if handle.read(2) == b"#!":
                return None
            st = os.fstat(handle.fileno())
    except OSError:
        return None
    return resolved, [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _load_probes(directory: Path) -> dict:
    """PROBES' entries by resolved binary; {} when the file is missing, unreadable or not ours."""
    try:
        found = json.loads((directory / PROBES).read_text())
    except (OSError, ValueError):
        return {}
    entries = (
        found.get("interpreters") if isinstance(found, dict) and found.get("layout") == 1 else None
    )
    return dict(entries) if isinstance(entries, dict) else {}


def _save_probes(directory: Path, known: dict) -> None:
    """Written whole (write_atomic): a reader sees the old file or the new one. A cache directory
    that cannot be written costs the probe next time, nothing else."""
    kept = {
        path: facts for path, facts in known.items() if os.path.exists(path)
    }  # uninstalled: dropped
    with contextlib.suppress(OSError):
        write_atomic(
            directory / PROBES, json.dumps({"layout": 1, "interpreters": kept}, indent=1).encode()
        )


def _candidates(minor: str | None) -> Iterator[str]:
    chosen = os.environ.get(CHOSEN_VAR)
    if chosen:
        yield chosen
        return
    if minor is None or minor == f"{sys.version_info[0]}.{sys.version_info[1]}":
        yield sys.executable
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    for major, each in PYTHONS:
        if minor is not None and f"{major}.{each}" != minor:
            continue
        found = shutil.which(f"python{major}.{each}")
        if found:
            yield found
        yield from (
            str(p) for p in sorted(pyenv.glob(f"{major}.{each}.*/bin/python"), reverse=True)
        )


def find_python(
    directory: Path, minor: str | None = None, wanted: str = ""
) -> tuple[str, str, str]:
    """(interpreter, minor, libdir) for the environment: of the given minor when one is asked for
    (wanted says why, e.g. which image runs it), unless TRITONBUILD_EMBEDDED_PYTHON names one; a
    clear error naming what to install when none fits. directory: where the answers are kept
    (PROBES)."""
    known = _load_probes(directory)
    before = dict(known)
    try:
        for python in _candidates(minor):
            probed = _probe(python, known)
            if probed and (minor is None or probed[0] == minor or os.environ.get(CHOSEN_VAR)):
                return python, *probed
    finally:
        if known != before:  # the new answers, in one write however many candidates were asked
            _save_probes(directory, known)
    raise _not_found(minor, wanted)


def _not_found(minor: str | None, wanted: str) -> ServerStartError:
    named = os.environ.get(CHOSEN_VAR)
    if named:
        return ServerStartError(
            f"{CHOSEN_VAR}={named} is not a working Python 3.10-3.12 with a shared libpython",
            hint=f"name another interpreter with {CHOSEN_VAR}, or unset it",
        )
    if minor is not None:
        return ServerStartError(
            f"{wanted or f'the target runs Python {minor}'}: no Python {minor} with a shared "
            f"libpython was found on PATH (python{minor}) or under pyenv, so the embedded "
            f"tritonserver cannot run the Python side as that image does",
            hint=f"install Python {minor} (e.g. 'apt install python{minor} libpython{minor}' or "
            f"'pyenv install {minor}' built with --enable-shared), or name one with "
            f"{CHOSEN_VAR}=/path/to/python{minor} (a Python of another minor named there is "
            "used as it is, and the report says MISMATCH)",
        )
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return ServerStartError(
        f"the embedded tritonserver needs a Python 3.10-3.12 (its stub needs numpy < 2, which has "
        f"no wheel for Python {here}); none was found on PATH (python3.12, python3.11, "
        "python3.10) or under pyenv",
        hint="install Python 3.12 (e.g. 'apt install python3.12 libpython3.12' or 'pyenv install "
        f"3.12' built with --enable-shared), or name one with {CHOSEN_VAR}=/path/to/python3.12; "
        "or verify against a running server with --server URL",
    )
