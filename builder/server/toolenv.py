"""The embedded tritonserver's Python side, in an environment of its own that tritonbuild makes and uses: never the
user's.

nvidia-pytriton bundles tritonserver and the Python-backend stubs, but declares numpy < 2 (the stub's need: with
numpy 2 its replies carry empty tensors) and, through tritonclient[grpc], protobuf >= 6. Installed beside tritonbuild
they would move the user's numpy and protobuf, so tritonbuild installs them (pytriton without its client stack)
into a venv under the cache directory instead, made once per Python minor and package set, on first use or by
`tritonbuild embedded install`:

    <envs>/embedded-py3.12-<key>/   key: sha256 of (Python minor, the requirements, TRITONBUILD_EMBEDDED_PACKAGES)

<envs> is TRITONBUILD_ENVS_DIR, else <cache dir>/envs (TRITONBUILD_CACHE_DIR or ~/.cache/tritonbuild). pip runs with
its own configuration (index, find-links, PIP_* variables), so a machine without network works from its local
index. A lock file serialises makers (parallel CI jobs); the venv is made under a temporary name and renamed into
place with its record written, so a half-made one is never used. Its interpreter is this one when it is Python
3.10-3.12, else (3.13: numpy < 2 has no wheel there) TRITONBUILD_EMBEDDED_PYTHON or a python3.12/3.11/3.10 found on
PATH or under pyenv. Each candidate is asked by running it (-I); a binary's answer is kept in
<envs>/interpreters.json under its resolved path with the file's identity (device, inode, size, mtime, ctime),
and asked again once the file is replaced or rewritten; a script (a pyenv shim) is run every time.

The stub runs with the venv's interpreter and ignores PYTHONPATH (it starts with -E); a model sees the venv's
packages, then, when tritonbuild runs on the same Python minor, the packages of the environment tritonbuild runs
in (a .pth file in the venv appends the directories named by TRITONBUILD_STUB_PATH, which the launcher sets).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from tritonbuild.core.cachedir import default_cache_dir
from tritonbuild.core.fsutil import write_atomic
from tritonbuild.errors import ServerStartError

# What the embedded server's Python side needs: the bundled server and stubs (without pytriton's own client stack:
# --no-deps), and the numpy the stub needs.
PYTRITON = "nvidia-pytriton>=0.7,<0.8"
NUMPY = "numpy>=1.24,<2"
# numpy < 2 has wheels for these; the bundled stubs cover 3.8-3.13
PYTHONS = ((3, 12), (3, 11), (3, 10))
RECORD = "tritonbuild-env.json"
PROBES = "interpreters.json"  # in envs_dir(): what each candidate interpreter said about itself (find_python)
STUB_PATH_VAR = "TRITONBUILD_STUB_PATH"
# NOTE: the stub embeds Python with an isolated configuration (no locale set, PYTHONIOENCODING ignored): its stdout
# is ASCII whatever LANG says, and a model that prints non-ASCII text fails (vLLM's engine prints '…': a
# UnicodeEncodeError at every start, seen on the H200). The .pth line also makes ASCII stdio UTF-8, and honours
# PYTHONDONTWRITEBYTECODE, which the isolated stub ignores: a model.py imported from a polled local repository wrote
# __pycache__/ into its version directory, and Triton's next poll saw the model modified and loaded it again.
_PTH = (
    "tritonbuild-stub-path.pth",
    "import os, sys; sys.path.extend(p for p in "
    f"os.environ.get('{STUB_PATH_VAR}', '').split(os.pathsep) if p and p not in sys.path); "
    "sys.dont_write_bytecode = sys.dont_write_bytecode or bool(os.environ.get('PYTHONDONTWRITEBYTECODE')); "
    "[s.reconfigure(encoding='utf-8', errors='backslashreplace') for s in (sys.stdout, sys.stderr) "
    "if getattr(s, 'encoding', 'utf-8').lower() in ('ascii', 'ansi_x3.4-1968')]\n",
)
PIP_TIMEOUT_S = 900


@dataclass(frozen=True)
class ToolEnv:
    """A made environment: its directory, Python minor ('3.12'), the interpreter's libpython directory, and the
    versions pip installed there."""

    path: Path
    python: str
    libdir: str
    versions: dict
    server: Path | None = None  # the bundled install, where it is not the venv's own (current())

    @property
    def site_packages(self) -> Path:
        return self.path / "lib" / f"python{self.python}" / "site-packages"

    @property
    def tritonserver(self) -> Path:
        """The bundled install: bin/tritonserver, backends/, python_backend_stubs/."""
        return self.server or self.site_packages / "pytriton" / "tritonserver"

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    def describe(self) -> str:
        return (
            f"{self.path} (Python {self.python}, "
            + ", ".join(f"{k} {v}" for k, v in self.versions.items())
            + ")"
        )


def envs_dir() -> Path:
    return Path(os.environ.get("TRITONBUILD_ENVS_DIR") or default_cache_dir() / "envs")


def extra_packages() -> tuple[str, ...]:
    """Requirements the user's Python models need in the embedded server (TRITONBUILD_EMBEDDED_PACKAGES, separated
    by spaces), installed beside numpy < 2; a different set is a different environment."""
    return tuple(sorted(set(os.environ.get("TRITONBUILD_EMBEDDED_PACKAGES", "").split())))


def env_name(python: str, packages: tuple[str, ...]) -> str:
    spec = json.dumps(
        {"python": python, "requires": [PYTRITON, NUMPY, *packages], "layout": 1}, sort_keys=True
    )
    return f"embedded-py{python}-{hashlib.sha256(spec.encode()).hexdigest()[:12]}"


def _probe(python: str, known: dict) -> tuple[str, str] | None:
    """(minor, libdir) of a working interpreter whose minor numpy < 2 serves and that has a shared libpython
    (the stub links it); None otherwise (a pyenv shim for a version not selected exits non-zero). What a binary
    said about itself is reused while the binary is the same file (known: PROBES' entries, updated here)."""
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
    if facts.get("minor") not in {f"{major}.{minor}" for major, minor in PYTHONS} or not facts.get(
        "shared"
    ):
        return None
    return facts["minor"], facts["libdir"]


def _ask(python: str) -> dict | None:
    """The interpreter's own answer (-I: PYTHON* variables and user site do not change it), None if it fails."""
    code = (
        "import sys, sysconfig; print('%d.%d' % sys.version_info[:2]); print(sysconfig.get_config_var('LIBDIR')"
        " or ''); print(int(bool(sysconfig.get_config_var('Py_ENABLE_SHARED'))))"
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
    """The resolved binary and what changes when it is replaced or rewritten (device, inode, size, mtime, ctime);
    None for a script: a pyenv shim picks its interpreter at each run (PYENV_VERSION, .python-version), so its
    answer is not the file's and it is run every time."""
    resolved = os.path.realpath(shutil.which(python) or python)
    try:
        with open(resolved, "rb") as handle:
            if handle.read(2) == b"#!":
                return None
            st = os.fstat(handle.fileno())
    except OSError:
        return None
    return resolved, [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _load_probes() -> dict:
    """PROBES' entries by resolved binary; {} when the file is missing, unreadable or not ours."""
    try:
        found = json.loads((envs_dir() / PROBES).read_text())
    except (OSError, ValueError):
        return {}
    entries = (
        found.get("interpreters") if isinstance(found, dict) and found.get("layout") == 1 else None
    )
    return dict(entries) if isinstance(entries, dict) else {}


def _save_probes(known: dict) -> None:
    """Written whole (write_atomic): a reader sees the old file or the new one. A cache directory that cannot be
    written costs the probe next time, nothing else."""
    kept = {
        path: facts for path, facts in known.items() if os.path.exists(path)
    }  # uninstalled: dropped
    with contextlib.suppress(OSError):
        write_atomic(
            envs_dir() / PROBES, json.dumps({"layout": 1, "interpreters": kept}, indent=1).encode()
        )


def _candidates() -> Iterator[str]:
    chosen = os.environ.get("TRITONBUILD_EMBEDDED_PYTHON")
    if chosen:
        yield chosen
        return
    yield sys.executable
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    for major, minor in PYTHONS:
        found = shutil.which(f"python{major}.{minor}")
        if found:
            yield found
        yield from (
            str(p) for p in sorted(pyenv.glob(f"{major}.{minor}.*/bin/python"), reverse=True)
        )


def find_python() -> tuple[str, str, str]:
    """(interpreter, minor, libdir) for the environment; a clear error naming what to install when none fits."""
    known = _load_probes()
    before = dict(known)
    try:
        for python in _candidates():
            probed = _probe(python, known)
            if probed:
                return python, *probed
    finally:
        if known != before:  # the new answers, in one write however many candidates were asked
            _save_probes(known)
    named = os.environ.get("TRITONBUILD_EMBEDDED_PYTHON")
    raise ServerStartError(
        (
            f"TRITONBUILD_EMBEDDED_PYTHON={named} is not a working Python 3.10-3.12 with a shared libpython"
            if named
            else f"the embedded tritonserver needs a Python 3.10-3.12 (its stub needs numpy < 2, which has no "
            f"wheel for Python {sys.version_info[0]}.{sys.version_info[1]}); none was found on PATH (python3.12, "
            "python3.11, python3.10) or under pyenv"
        ),
        hint="install Python 3.12 (e.g. 'apt install python3.12 libpython3.12' or 'pyenv install 3.12' built with "
        "--enable-shared), or name one with TRITONBUILD_EMBEDDED_PYTHON=/path/to/python3.12; or verify against "
        "a running server with --server URL",
    )


def _read(path: Path) -> ToolEnv | None:
    try:
        record = json.loads((path / RECORD).read_text())
    except (OSError, ValueError):
        return None
    env = ToolEnv(path, record["python"], record["libdir"], record["versions"])
    # NOTE: the venv's python links to the interpreter it was made from: gone (uninstalled) means unusable
    if not (
        (env.bin / "python").exists() and (env.tritonserver / "bin" / "tritonserver").is_file()
    ):
        return None
    pth = env.site_packages / _PTH[0]
    with contextlib.suppress(
        OSError
    ):  # an environment made by an earlier tritonbuild gets today's line
        if pth.is_file() and pth.read_text() != _PTH[1]:
            write_atomic(pth, _PTH[1].encode())
    return env


def current() -> ToolEnv | None:
    """This environment, when it already holds nvidia-pytriton and numpy < 2 (a venv kept for the embedded server,
    or a GPU machine's carried wheels on PYTHONPATH): used as it is, nothing is made. Not when packages are asked
    for (TRITONBUILD_EMBEDDED_PACKAGES): those go into a made one."""
    spec = importlib.util.find_spec("pytriton")
    if (
        spec is None
        or not spec.submodule_search_locations
        or _current_minor() is None
        or extra_packages()
    ):
        return None
    try:
        numpy = metadata.version("numpy")
    except metadata.PackageNotFoundError:
        return None
    if int(numpy.split(".")[0]) >= 2:
        return None
    server = Path(next(iter(spec.submodule_search_locations))) / "tritonserver"
    versions = {"numpy": numpy}
    with contextlib.suppress(metadata.PackageNotFoundError):
        versions["nvidia_pytriton"] = metadata.version("nvidia-pytriton")
    return ToolEnv(
        Path(sys.prefix),
        _current_minor(),
        sysconfig.get_config_var("LIBDIR") or "",
        versions,
        server,
    )


def available() -> ToolEnv | None:
    """What the embedded server's Python side runs in without making anything: this environment (current()) or a
    made one (find())."""
    return current() or find()


def find(python: str | None = None) -> ToolEnv | None:
    """The made environment for this machine's choice of interpreter (or the given minor), if there is one."""
    minor = python or _current_minor()
    if minor is None:
        try:
            minor = find_python()[
                1
            ]  # e.g. tritonbuild on 3.13: which 3.10-3.12 the environment got
        except ServerStartError:
            return None
    return _read(envs_dir() / env_name(minor, extra_packages()))


def _current_minor() -> str | None:
    """This interpreter's minor when it hosts the environment, else None (the choice needs a probe)."""
    if os.environ.get("TRITONBUILD_EMBEDDED_PYTHON"):
        return None
    return (
        f"{sys.version_info[0]}.{sys.version_info[1]}" if sys.version_info[:2] in PYTHONS else None
    )


def ensure(progress: Callable[[str], None] | None = None) -> ToolEnv:
    """The environment, made now if it is missing (progress gets one line before pip runs)."""
    made = available()
    if made is not None:
        return made
    python, minor, libdir = find_python()
    root = envs_dir()
    target = root / env_name(minor, extra_packages())
    made = _read(target)
    if made is not None:
        return made
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f"{target.name}.lock"):
        made = _read(target)  # another process may have made it while this one waited
        if made is not None:
            return made
        (progress or _stderr)(
            f"making the embedded tritonserver's environment (nvidia-pytriton, numpy < 2, Python "
            f"{minor}) in {target}: once, with pip's own index settings"
        )
        return _make(python, minor, libdir, target)


def summary(*, make: bool = True, progress: Callable[[str], None] | None = None) -> dict:
    """Where the environment is and what it holds ({"path": None} when not made), made first when make."""
    env = available()
    was_there = env is not None
    if env is None and make:
        env = ensure(progress)
    return {
        "path": str(env.path) if env else None,
        "python_minor": env.python if env else None,
        "versions": env.versions if env else {},
        "packages": list(extra_packages()),
        "envs_dir": str(envs_dir()),
        "made": bool(env) and not was_there,
    }


def _stderr(line: str) -> None:
    sys.stderr.write(f"tritonbuild: {line}\n")
    sys.stderr.flush()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _make(python: str, minor: str, libdir: str, target: Path) -> ToolEnv:
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        own_pip = importlib.util.find_spec("pip") is not None
        _run(
            [python, "-m", "venv", *([] if not own_pip else ["--without-pip"]), str(work)],
            "python -m venv",
        )
        pip = (
            [sys.executable, "-m", "pip", "--python", str(work / "bin" / "python")]
            if own_pip
            else [str(work / "bin" / "python"), "-m", "pip"]
        )
        # NOTE: numpy (and the user's packages, with their dependencies) first, pytriton without its client stack
        # last, so pip never reports pytriton's undeclared-here requirements as conflicts.
        # NOTE: wheels only for these two: numpy 1.26 from source takes minutes and a compiler
        quiet = ["--disable-pip-version-check", "-q", "--only-binary=numpy,nvidia-pytriton"]
        _run([*pip, "install", *quiet, NUMPY, *extra_packages()], "pip install")
        _run([*pip, "install", *quiet, "--no-deps", PYTRITON], "pip install")
        site = work / "lib" / f"python{minor}" / "site-packages"
        (site / _PTH[0]).write_text(_PTH[1])
        versions = {name: _version(site, name) for name in ("nvidia_pytriton", "numpy")}
        (work / RECORD).write_text(
            json.dumps(
                {
                    "python": minor,
                    "libdir": libdir,
                    "interpreter": python,
                    "packages": list(extra_packages()),
                    "versions": versions,
                },
                indent=1,
            )
        )
        work.rename(target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    made = _read(target)
    if made is None:
        raise ServerStartError(
            f"{target}: made, but it holds no tritonserver", hint=f"remove {target} and retry"
        )
    return made


def _version(site: Path, dist: str) -> str:
    found = sorted(site.glob(f"{dist}-*.dist-info"))
    return found[0].name[len(dist) + 1 :].removesuffix(".dist-info") if found else "?"


def _run(argv: list[str], what: str) -> None:
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
        raise ServerStartError(
            f"cannot make the embedded server's environment: {what} exited with "
            f"{done.returncode}:\n{tail}",
            hint="pip reads its own index settings (pip.conf, PIP_INDEX_URL, PIP_FIND_LINKS): "
            f"make {PYTRITON} and {NUMPY} reachable there (a wheel directory works offline), "
            "then run 'tritonbuild embedded install'",
        )


def unpack_wheels(wheels: list[Path], site: Path) -> Path:
    """Pure-Python wheels unpacked into one directory a Python can import from (a wheel is a zip laid out as
    site-packages, dist-info included, so importlib.metadata finds their entry points there)."""
    import zipfile

    site.mkdir(parents=True, exist_ok=True)
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            z.extractall(site)
    return site


def sees_stub_path(env: ToolEnv) -> bool:
    """Whether the environment's interpreters add TRITONBUILD_STUB_PATH to sys.path (one tritonbuild made); an
    environment used as it is (current()) does not."""
    return (Path(env.site_packages) / _PTH[0]).is_file()


def installed_wheel(env: ToolEnv, wheel: Path) -> bool:
    """Whether the wheel's distribution, at the wheel's version, is installed in the environment (its dist-info)."""
    dist, version = wheel.name.split("-")[:2]
    return (Path(env.site_packages) / f"{dist}-{version}.dist-info").is_dir()
