"""The embedded tritonserver's Python side, in an environment of its own that tritonbuild makes and
uses: never the user's.

nvidia-pytriton bundles tritonserver and the Python-backend stubs (one per Python minor), but
declares numpy < 2 (the stub's need: with numpy 2 its replies carry empty tensors) and, through
tritonclient[grpc], protobuf >= 6. Installed beside tritonbuild they would move the user's numpy and
protobuf, so tritonbuild installs them (pytriton without its client stack) into a venv under the
cache directory instead, made once per Python minor and package set, on first use or by `tritonbuild
embedded install` (server/envmake.py):

    <envs>/embedded-py3.12-<key>/   key: sha256 of (Python minor, the requirements,
                                    TRITONBUILD_EMBEDDED_PACKAGES)

<envs> is TRITONBUILD_ENVS_DIR, else <cache dir>/envs (TRITONBUILD_CACHE_DIR or
~/.cache/tritonbuild). A lock file serialises makers (parallel CI jobs). Its interpreter
(server/interpreters.py) is this one when it is Python 3.10-3.12, else one found on PATH or under
pyenv; with a target minor (the Python of the image the repository is served by: server/target.py),
one of that minor, so environments of several minors sit side by side, each under its own key.

The stub runs with the venv's interpreter and ignores PYTHONPATH (it starts with -E); a model sees
the venv's packages, then, when tritonbuild runs on the same Python minor, the packages of the
environment tritonbuild runs in (a .pth file in the venv appends the directories named by
TRITONBUILD_STUB_PATH, which the launcher sets).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import importlib.util
import json
import os
import sys
import sysconfig
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from tritonbuild.core.cachedir import default_cache_dir
from tritonbuild.core.fsutil import write_atomic
from tritonbuild.errors import ServerStartError
from tritonbuild.server import envmake, envprune, interpreters
from tritonbuild.server.envmake import NUMPY, PTH, PYTRITON, RECORD, STUB_PATH_VAR
from tritonbuild.server.interpreters import CHOSEN_VAR, PROBES, PYTHONS
from tritonbuild.server.mirror import Mirror, mirror_of

__all__ = ["NUMPY", "PROBES", "PYTHONS", "PYTRITON", "RECORD", "STUB_PATH_VAR", "ServerStartError"]


@dataclass(frozen=True)
class ToolEnv:
    """A made environment: its directory, Python minor ('3.12'), the interpreter's libpython
    directory, and the versions pip installed there."""

    path: Path
    python: str
    libdir: str
    versions: dict
    server: Path | None = None  # the bundled install, where it is not the venv's own (current())
    # what the models import here, installed for this Python (mirror_for; on the stub's path)
    mirror: Path | None = None

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

    @property
    def interpreter(self) -> Path:
        return self.bin / "python"

    def describe(self) -> str:
        return (
            f"{self.path} (Python {self.python}, "
            + ", ".join(f"{k} {v}" for k, v in self.versions.items())
            + ")"
        )


def envs_dir() -> Path:
    return Path(os.environ.get("TRITONBUILD_ENVS_DIR") or default_cache_dir() / "envs")


def extra_packages() -> tuple[str, ...]:
    """Requirements the user's Python models need in the embedded server
    (TRITONBUILD_EMBEDDED_PACKAGES, separated by spaces), installed beside numpy < 2; a different
    set is a different environment."""
    return tuple(sorted(set(os.environ.get("TRITONBUILD_EMBEDDED_PACKAGES", "").split())))


def env_name(python: str, packages: tuple[str, ...]) -> str:
    spec = json.dumps(
        {"python": python, "requires": [PYTRITON, NUMPY, *packages], "layout": 1}, sort_keys=True
    )
    return f"embedded-py{python}-{hashlib.sha256(spec.encode()).hexdigest()[:12]}"


def mirror_for(minor: str, sources: tuple[Path, ...]) -> Mirror:
    """What an environment of that minor needs installed beside it for the Python files under
    sources (a repository, backend directories) to import what they import here
    (server/mirror.py): nothing on tritonbuild's own minor, whose packages the stub reads
    (TRITONBUILD_STUB_PATH)."""
    if not sources or minor == f"{sys.version_info[0]}.{sys.version_info[1]}":
        return Mirror()
    return mirror_of(sources, minor, keep=extra_packages())


def mirror_name(env: ToolEnv, mirror: Mirror) -> str:
    """<envs>/mirror-py3.12-<key>: key over the minor, the environment's numpy and the pins."""
    spec = json.dumps(
        [env.python, env.versions.get("numpy"), mirror.requirements, mirror.constraints, 1]
    )
    return f"mirror-py{env.python}-{hashlib.sha256(spec.encode()).hexdigest()[:12]}"


def _with_mirror(
    env: ToolEnv | None,
    sources: tuple[Path, ...],
    make: Callable[[str], None] | None = None,
    at_most: int | None = None,
) -> ToolEnv | None:
    """env with the directory of what the models under sources import (mirror_for), made when make
    (the progress line) is given; None when it is needed, not made and not to be made. at_most:
    bytes (as installed here) a mirror made on the fly may take; a larger one is an error naming
    the command that makes it ahead."""
    mirror = mirror_for(env.python, sources) if env is not None else Mirror()
    if env is None or not mirror:
        return env
    target = envs_dir() / mirror_name(env, mirror)
    if not (target / RECORD).is_file() and make is not None:
        if at_most is not None and mirror.size > at_most:
            raise ServerStartError(
                f"what the models import weighs {mirror.size / 1e9:.1f} GB as installed here "
                f"({' '.join(mirror.requirements)}): not installed for Python {env.python} on the "
                "fly for a recipe's image",
                hint=f"'tritonbuild embedded install --for {sources[0]}' installs it once "
                "(or pass --triton-image, which installs it)",
            )
        with _locked(envs_dir() / f"{target.name}.lock"):
            if not (target / RECORD).is_file():
                make(
                    f"installing what the models import, at this environment's versions, for "
                    f"Python {env.python} (about {mirror.size / 1e6:.0f} MB as installed here): "
                    f"{' '.join(mirror.requirements)} in {target}"
                )
                numpy = env.versions.get("numpy", "")
                envmake.make_mirror(env.bin / "python", numpy, target, mirror)
    if not (target / RECORD).is_file():
        return None
    envprune.touch(target / RECORD)
    return dataclasses.replace(env, mirror=target / "site")


def find_python(minor: str | None = None, wanted: str = "") -> tuple[str, str, str]:
    """(interpreter, minor, libdir) for the environment (of that minor when given:
    server/interpreters.py)."""
    return interpreters.find_python(envs_dir(), minor, wanted)


def _read(path: Path) -> ToolEnv | None:
    try:
        record = json.loads((path / RECORD).read_text())
    except (OSError, ValueError):
        return None
    env = ToolEnv(path, record["python"], record["libdir"], record["versions"])
    # NOTE: the venv's python links to the interpreter it was made from: gone (uninstalled) means
    # unusable
    if not (
        (env.bin / "python").exists() and (env.tritonserver / "bin" / "tritonserver").is_file()
    ):
        return None
    envprune.touch(path / RECORD)  # used: `embedded prune` keeps it
    pth = env.site_packages / PTH[0]
    # an environment made by an earlier tritonbuild gets today's line
    with contextlib.suppress(OSError):
        if pth.is_file() and pth.read_text() != PTH[1]:
            write_atomic(pth, PTH[1].encode())
    return env


def current(minor: str | None = None) -> ToolEnv | None:
    """This environment, when it already holds nvidia-pytriton and numpy < 2 (a venv kept for the
    embedded server, or a GPU machine's carried wheels on PYTHONPATH) and runs the minor asked for:
    used as it is, nothing is made. Not when packages are asked for (TRITONBUILD_EMBEDDED_PACKAGES):
    those go into a made one."""
    spec = importlib.util.find_spec("pytriton")
    here = _current_minor()
    if (
        spec is None
        or not spec.submodule_search_locations
        or here is None
        or (minor is not None and minor != here)
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
        Path(sys.prefix), here, sysconfig.get_config_var("LIBDIR") or "", versions, server
    )


def available(minor: str | None = None, sources: tuple[Path, ...] = ()) -> ToolEnv | None:
    """What the embedded server's Python side runs in without making anything: this environment
    (current()) or a made one (find()), for the target minor when one is given, with what the
    Python files under sources import installed for it (mirror_for)."""
    return _with_mirror(current(minor) or find(minor), sources)


def find(minor: str | None = None) -> ToolEnv | None:
    """The made environment for this machine's choice of interpreter (of the given minor), if there
    is one."""
    chosen = _chosen_minor(minor)
    return _read(envs_dir() / env_name(chosen, extra_packages())) if chosen else None


def _chosen_minor(minor: str | None) -> str | None:
    """The minor of the interpreter the environment gets: the one asked for, else this
    interpreter's; TRITONBUILD_EMBEDDED_PYTHON's own (asked by running it) when it names one. None
    when none fits."""
    if not os.environ.get(CHOSEN_VAR) and (minor or _current_minor()):
        return minor or _current_minor()
    try:
        return find_python(minor)[1]  # e.g. tritonbuild on 3.13: which 3.10-3.12 it got
    except ServerStartError:
        return None


def _current_minor() -> str | None:
    """This interpreter's minor when it hosts the environment, else None (the choice needs a
    probe)."""
    if os.environ.get(CHOSEN_VAR):
        return None
    return (
        f"{sys.version_info[0]}.{sys.version_info[1]}" if sys.version_info[:2] in PYTHONS else None
    )


def ensure(
    progress: Callable[[str], None] | None = None,
    minor: str | None = None,
    wanted: str = "",
    sources: tuple[Path, ...] = (),
    at_most: int | None = None,
) -> ToolEnv:
    """The environment (of the target minor when given; wanted says why, for the error when no such
    Python is here), with what the Python files under sources import here (mirror_for), made now if
    missing (progress gets one line before pip runs; at_most: _with_mirror)."""
    base = _ensure(progress, minor, wanted)
    return _with_mirror(base, sources, progress or _stderr, at_most)


def _ensure(progress: Callable[[str], None] | None, minor: str | None, wanted: str) -> ToolEnv:
    made = current(minor) or find(minor)
    if made is not None:
        return made
    python, found, libdir = find_python(minor, wanted)
    root = envs_dir()
    target = root / env_name(found, extra_packages())
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
            f"{found}) in {target}: once, with pip's own index settings"
        )
        return _make(python, found, libdir, target)


def summary(
    *,
    make: bool = True,
    progress: Callable[[str], None] | None = None,
    minor: str | None = None,
    wanted: str = "",
    sources: tuple[Path, ...] = (),
) -> dict:
    """Where the environment is and what it holds ({"path": None} when not made), made first when
    make; with what the Python files under sources import here (mirror_for)."""
    base = current(minor) or find(minor)
    env = _with_mirror(base, sources)
    was_there = env is not None
    if env is None and make:
        env = ensure(progress, minor, wanted, sources)
    env = env or base  # made, its mirror not yet: shown as such
    mirror = mirror_for(env.python, sources) if env else Mirror()
    return {
        "path": str(env.path) if env else None,
        "python_minor": env.python if env else None,
        "target_python": minor,
        "versions": env.versions if env else {},
        "packages": list(extra_packages()),
        "envs_dir": str(envs_dir()),
        "made": bool(env) and not was_there,
        "mirrored": list(mirror.requirements),
        "mirror_path": str(env.mirror) if env and env.mirror else None,
        "not_installed_here": list(mirror.missing),
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
    envmake.make_venv(python, minor, libdir, target, extra_packages())
    made = _read(target)
    if made is None:
        raise ServerStartError(
            f"{target}: made, but it holds no tritonserver", hint=f"remove {target} and retry"
        )
    return made


def unpack_wheels(wheels: list[Path], site: Path) -> Path:
    """Pure-Python wheels unpacked into one directory a Python can import from (a wheel is a zip
    laid out as site-packages, dist-info included, so importlib.metadata finds their entry points
    there)."""
    import zipfile

    site.mkdir(parents=True, exist_ok=True)
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            z.extractall(site)
    return site


def sees_stub_path(env: ToolEnv) -> bool:
    """Whether the environment's interpreters add TRITONBUILD_STUB_PATH to sys.path (one tritonbuild
    made); an environment used as it is (current()) does not."""
    return (Path(env.site_packages) / PTH[0]).is_file()


def installed_wheel(env: ToolEnv, wheel: Path) -> bool:
    """Whether the wheel's distribution, at the wheel's version, is installed in the environment
    (its dist-info)."""
    dist, version = wheel.name.split("-")[:2]
    return (Path(env.site_packages) / f"{dist}-{version}.dist-info").is_dir()
