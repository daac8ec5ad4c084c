"""Making the embedded tritonserver's environment (server/toolenv.py decides where and when): a venv
from the chosen interpreter, numpy < 2 and the user's packages, then nvidia-pytriton without its
client stack, by pip with its own configuration (index, find-links, PIP_* variables), under a
temporary name renamed into place with its record: a half-made one is never used."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from tritonbuild.errors import ServerStartError
from tritonbuild.server.mirror import Mirror

# What the embedded server's Python side needs: the bundled server and stubs (without pytriton's own
# client stack: --no-deps), and the numpy the stub needs.
PYTRITON = "nvidia-pytriton>=0.7,<0.8"
NUMPY = "numpy>=1.24,<2"
RECORD = "tritonbuild-env.json"
STUB_PATH_VAR = "TRITONBUILD_STUB_PATH"
PIP_TIMEOUT_S = 900
# NOTE: the stub embeds Python with an isolated configuration (no locale set, PYTHONIOENCODING
# ignored): its stdout is ASCII whatever LANG says, and a model that prints non-ASCII text fails
# (vLLM's engine prints '…': a UnicodeEncodeError at every start, seen on the H200). The .pth line
# also makes ASCII stdio UTF-8, and honours PYTHONDONTWRITEBYTECODE, which the isolated stub
# ignores: a model.py imported from a polled local repository wrote __pycache__/ into its version
# directory, and Triton's next poll saw the model modified and loaded it again.
PTH = (
    "tritonbuild-stub-path.pth",
    "import os, sys; sys.path.extend(p for p in "
    f"os.environ.get('{STUB_PATH_VAR}', '').split(os.pathsep) if p and p not in sys.path); "
    "sys.dont_write_bytecode = sys.dont_write_bytecode or "
    "bool(os.environ.get('PYTHONDONTWRITEBYTECODE')); "
    "[s.reconfigure(encoding='utf-8', errors='backslashreplace') for s in (sys.stdout, sys.stderr) "
    "if getattr(s, 'encoding', 'utf-8').lower() in ('ascii', 'ansi_x3.4-1968')]\n",
)


def make_venv(
    python: str, minor: str, libdir: str, target: Path, packages: tuple[str, ...]
) -> None:
    """The environment at target, with its record written last; nothing left behind on failure."""
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        own_pip = _own_pip()
        _run(
            [python, "-m", "venv", *([] if not own_pip else ["--without-pip"]), str(work)],
            "python -m venv",
        )
        pip = (
            [sys.executable, "-m", "pip", "--python", str(work / "bin" / "python")]
            if own_pip
            else [str(work / "bin" / "python"), "-m", "pip"]
        )
        # NOTE: numpy (and the user's packages, with their dependencies) first, pytriton without its
        # client stack last, so pip never reports pytriton's undeclared-here requirements as
        # conflicts.
        # NOTE: wheels only for these two: numpy 1.26 from source takes minutes and a compiler
        quiet = ["--disable-pip-version-check", "-q", "--only-binary=numpy,nvidia-pytriton"]
        _run([*pip, "install", *quiet, NUMPY, *packages], "pip install")
        _run([*pip, "install", *quiet, "--no-deps", PYTRITON], "pip install")
        site = work / "lib" / f"python{minor}" / "site-packages"
        (site / PTH[0]).write_text(PTH[1])
        versions = {name: _version(site, name) for name in ("nvidia_pytriton", "numpy")}
        record = {
            "python": minor,
            "libdir": libdir,
            "interpreter": python,
            "packages": list(packages),
            "versions": versions,
        }
        (work / RECORD).write_text(json.dumps(record, indent=1))
        work.rename(target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def make_mirror(python: Path, numpy: str, target: Path, mirror: Mirror) -> None:
    """What the models import, at the caller's versions (server/mirror.py), installed by pip for the
    environment's interpreter into a directory of its own at target (the stub reads it through
    TRITONBUILD_STUB_PATH), with its record written last; nothing left behind on failure. The
    environment's numpy is a constraint: a package that needs numpy gets the stub's."""
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        pins = work / "constraints.txt"
        pins.write_text("\n".join([f"numpy=={numpy}", *mirror.constraints]) + "\n")
        own_pip = _own_pip()
        pip = (
            [sys.executable, "-m", "pip", "--python", str(python)]
            if own_pip
            else [str(python), "-m", "pip"]
        )
        site = work / "site"
        quiet = ["--disable-pip-version-check", "-q", "--only-binary=numpy"]
        argv = [
            *pip,
            "install",
            *quiet,
            "--target",
            str(site),
            "-c",
            str(pins),
            *mirror.requirements,
        ]
        _run(argv, "pip install", mirror)
        record = {
            "requirements": list(mirror.requirements),
            "constraints": list(mirror.constraints),
        }
        (work / RECORD).write_text(json.dumps(record, indent=1))
        work.rename(target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _own_pip() -> bool:
    """Whether this interpreter has pip (then it installs into the venv with --python). Asked of the
    installed distributions, not importlib.util.find_spec("pip"): on Python < 3.12 that lookup makes
    setuptools' distutils shim stand down for the rest of the process, and a later `import
    setuptools` (torch's AOTInductor compile, a user's build) then fails on the stdlib's distutils."""
    try:
        metadata.distribution("pip")
    except metadata.PackageNotFoundError:
        return False
    return True


def _version(site: Path, dist: str) -> str:
    found = sorted(site.glob(f"{dist}-*.dist-info"))
    return found[0].name[len(dist) + 1 :].removesuffix(".dist-info") if found else "?"


def _run(argv: list[str], what: str, mirror: Mirror | None = None) -> None:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise ServerStartError(
            f"cannot make the embedded server's environment: {what} failed: {e}",
            hint="check the Python install named above",
        ) from None
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        if mirror is not None:
            said = (done.stderr or done.stdout).splitlines()
            first = next((line for line in said if line.startswith("ERROR:")), "")
            raise ServerStartError(
                f"cannot install what the models import ({' '.join(mirror.requirements)}, the "
                f"versions installed here) for the embedded server's Python: {what} exited with "
                f"{done.returncode} ({first.removeprefix('ERROR: ') or 'see below'}):\n{tail}",
                hint="name versions that install on that Python with TRITONBUILD_EMBEDDED_PACKAGES "
                "(a package named there is not pinned to this environment's version), or make "
                "these reachable in pip's index settings",
            )
        raise ServerStartError(
            f"cannot make the embedded server's environment: {what} exited with "
            f"{done.returncode}:\n{tail}",
            hint="pip reads its own index settings (pip.conf, PIP_INDEX_URL, PIP_FIND_LINKS): "
            f"make {PYTRITON} and {NUMPY} reachable there (a wheel directory works offline), "
            "then run 'tritonbuild embedded install'",
        )
