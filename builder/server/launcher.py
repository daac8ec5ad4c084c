"""Which tritonserver binary runs, with which backend directory and environment: one launcher for
the embedded server (nvidia-pytriton's bundled binary) and for the fleet's own (`--tritonserver
PATH`, a local install such as /opt/tritonserver/bin/tritonserver), so verify, serve, tune and infer
start either the same way.

An install is recognised by its layout: nvidia-pytriton's (`<install>/python_backend_stubs/`) gets a
private backend directory with the Python-backend stub built for the interpreter of tritonbuild's
own environment for it (server/toolenv.py: numpy < 2, never the user's), that interpreter's
libpython on LD_LIBRARY_PATH and its venv first on PATH; any other install (Triton's own:
`<install>/bin/tritonserver`, `<install>/backends/`) runs with its own backends and its own Python
stub, in the caller's environment.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from tritonbuild.core.stores import is_url, served_drivers
from tritonbuild.errors import UsageError
from tritonbuild.server import toolenv
from tritonbuild.server.target import EMBEDDED, ServingTarget, Target, python_side
from tritonbuild.server.toolenv import ServerStartError

ENGINES = ("docker", "podman")
# Inside the NGC image (server docs/getting_started/quickstart.md): the repository mounted at
# /models, the image's tritonserver on its default ports;
# tests/contracts/facts/triton_container.json records the usage.
CONTAINER_REPOSITORY = "/models"
CONTAINER_PORTS = (8000, 8001, 8002)


def passed_env() -> tuple[str, ...]:
    """Credentials a cloud repository needs inside the container (each store's driver names those
    tritonserver reads: triton_env), passed by name (docker -e NAME: the value never appears on
    the command line)."""
    return tuple(dict.fromkeys(name for d in served_drivers() for name in d.triton_env))


# Triton's rule for a Python-based backend (e.g. the vLLM backend):
# <backend-directory>/<name>/model.py, run by the Python backend's stub (core: a backend directory
# without libtriton_<name>.so but with a model.py)
BACKEND_ENTRY = "model.py"


def pytriton_dir() -> Path:
    """nvidia-pytriton's bundled server, in the environment tritonbuild keeps for it
    (server/toolenv.py; made on first use)."""
    return toolenv.ensure().tritonserver


def launcher_for(
    serving: ServingTarget = EMBEDDED, sources: tuple[Path, ...] = ()
) -> Launcher | ContainerLauncher:
    """The launcher serving's tritonserver (`--tritonserver`) names: a local binary, 'docker:IMAGE'
    / 'podman:IMAGE' for a container of that image, or None for the embedded one. Its target: the
    image the repository is served by (server/target.py): the embedded server's Python side runs
    that image's Python, with what the Python files under sources (the repository, backend
    directories) import here (server/mirror.py)."""
    tritonserver, target = serving.tritonserver, serving.target
    if tritonserver is None:
        env, why = _tool_env(target, sources)
        return Launcher(env.tritonserver / "bin" / "tritonserver", False, env, target, why)
    engine, sep, image = str(tritonserver).partition(":")
    if sep and engine in ENGINES and image:
        return ContainerLauncher(engine, image)
    binary = checked_binary(tritonserver)
    # A bundled layout's Python side is tritonbuild's environment too (the stub's numpy < 2)
    bundled = _bundled(binary.parent.parent)
    env, why = _tool_env(target, sources) if bundled else (None, None)
    return Launcher(binary, True, env, target, why)


# Why a recipe's image's Python could not run, by (minor, sources): asked once per process (a failed
# pip install is not tried again by the next launcher of the same run)
_NOT_RUN: dict[tuple, str] = {}
# A recipe's image (not asked for) installs the models' imports on the fly up to this size as
# installed here (a tokenizer's ~100 MB); a PyPI torch for another Python is GBs of CUDA wheels: not
# without being asked (--triton-image, embedded install --for)
ON_THE_FLY_BYTES = 500_000_000


def _tool_env(
    target: Target | None, sources: tuple[Path, ...]
) -> tuple[toolenv.ToolEnv, str | None]:
    """The environment the stub runs in, and why it is not the target's Python when a recipe's
    image could not be had (no such Python here, its packages not installable): that falls back to
    the default environment, said in the report. --triton-image's target (enforced) is an error."""
    if target is None:
        return toolenv.ensure(sources=sources), None
    key = (target.python, tuple(map(str, sources)))
    if not target.enforced and key in _NOT_RUN:
        return toolenv.ensure(sources=sources), _NOT_RUN[key]
    at_most = None if target.enforced else ON_THE_FLY_BYTES
    try:
        made = toolenv.ensure(
            minor=target.python, wanted=target.wanted(), sources=sources, at_most=at_most
        )
        return made, None
    except ServerStartError as e:
        if target.enforced:
            raise
        _NOT_RUN[key] = e.message.splitlines()[0]
        return toolenv.ensure(sources=sources), _NOT_RUN[key]


def reported_python(serving: ServingTarget, sources: tuple[Path, ...] = ()) -> dict:
    """The Python the server's Python side ran on, beside the target's
    (server/target.py:python_side), made nothing: the environment launcher_for gave the server. A
    Triton install's or a container's own Python is not known here."""
    tritonserver, target = serving.tritonserver, serving.target
    engine, sep, image = str(tritonserver).partition(":")
    bundled = tritonserver is None or (
        not (sep and engine in ENGINES and image)
        and _bundled(Path(tritonserver).expanduser().resolve().parent.parent)
    )
    why = _NOT_RUN.get((target.python, tuple(map(str, sources)))) if target else None
    minor = target.python if target and why is None else None
    env = toolenv.available(minor, sources) if bundled else None
    path = str(env.path) if env else None
    return python_side(env.python if env else None, path, target, own=not bundled, why=why)


def _bundled(install: Path) -> bool:
    return (install / "python_backend_stubs").is_dir()


def checked_binary(binary: str | Path) -> Path:
    path = Path(binary).expanduser()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise UsageError(
            f"--tritonserver {binary}: "
            f"{'not an executable file' if path.exists() else 'no such file'}",
            hint="pass the tritonserver binary itself, e.g. /opt/tritonserver/bin/tritonserver",
        )
    return path.resolve()


@dataclass(frozen=True)
class Launcher:
    binary: Path
    chosen: bool  # given with --tritonserver (else the embedded one)
    python: toolenv.ToolEnv | None = None  # the stub's environment (bundled layouts)
    target: Target | None = None  # the image whose Python it is (server/target.py)
    # why the target's Python did not run (a recipe's image, fallen back to the default one)
    not_run: str | None = None

    def command(
        self, repository: str, scratch: Path, ports: tuple[int, int, int], options: list[str]
    ) -> list[str]:
        """tritonserver's argv: this binary on the loopback ports."""
        backends = self.backend_dir(scratch)
        http, grpc, metrics = ports
        return [
            str(self.binary),
            f"--model-repository={repository}",
            *([f"--backend-directory={backends}"] if backends is not None else []),
            "--http-address=127.0.0.1",
            f"--http-port={http}",
            "--grpc-address=127.0.0.1",
            f"--grpc-port={grpc}",
            "--metrics-address=127.0.0.1",
            f"--metrics-port={metrics}",
            *options,
        ]

    def stopped(self, ports: tuple[int, int, int]) -> None:
        """Nothing outlives the process group a local binary runs in."""

    @property
    def install(self) -> Path:
        return self.binary.parent.parent

    @property
    def bundled(self) -> bool:
        """nvidia-pytriton's layout: the Python stub is ours to place, for this interpreter."""
        return _bundled(self.install)

    def describe(self) -> str:
        return "embedded" if not self.chosen else f"at {self.binary}"

    def backend_dir(self, scratch: Path) -> Path | None:
        """The --backend-directory to pass (None: the install's own default)."""
        if not self.bundled:
            own = self.install / "backends"
            return own if own.is_dir() else None
        stub = (
            self.install
            / "python_backend_stubs"
            / self._python().python
            / "triton_python_backend_stub"
        )
        if not stub.is_file():
            raise ServerStartError(
                f"no Python-backend stub for Python {self._python().python} in {self.install}",
                hint="name another interpreter with TRITONBUILD_EMBEDDED_PYTHON (3.10-3.12)",
            )
        dest = scratch / "backends" / "python"
        shutil.copytree(
            self.install / "backends" / "python", dest, ignore=shutil.ignore_patterns("__pycache__")
        )
        shutil.copy2(stub, dest / "triton_python_backend_stub")
        os.chmod(dest / "triton_python_backend_stub", 0o755)
        return dest.parent

    def env(self) -> dict:
        env = dict(os.environ)
        # NOTE: for the model's own subprocesses; the stub's interpreter ignores the environment
        # (sys.flags.ignore_environment) and writes __pycache__/ beside model.py: EmbeddedServer
        # removes those.
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if not self.bundled:
            return env  # the install's own stub and Python, as the fleet runs it
        merged = {**env, **stub_env(self._python(), self.install, env)}
        if not (self._python().path / "pyvenv.cfg").is_file():
            merged.pop(
                "VIRTUAL_ENV"
            )  # this environment used as it is (toolenv.current()), and it is no venv
        return merged

    def tool_env(self) -> toolenv.ToolEnv:
        """The Python environment the stub runs in."""
        return self._python()

    def python_side(self) -> dict:
        """The Python the stub runs on beside the target's (None where the install's own runs)."""
        env = self._python() if self.bundled else None
        path = str(env.path) if env else None
        return python_side(
            env.python if env else None, path, self.target, own=not self.bundled, why=self.not_run
        )

    def _python(self) -> toolenv.ToolEnv:
        return self.python or toolenv.ensure()


def stub_env(python: toolenv.ToolEnv, install: Path, env: dict) -> dict:
    """The variables a bundled server needs for its Python stub: the stub finds its interpreter (the
    tool environment's) through PATH and VIRTUAL_ENV, links libpython from LD_LIBRARY_PATH, and, on
    the same Python minor as tritonbuild's, sees this environment's packages after the tool
    environment's (TRITONBUILD_STUB_PATH); on another, what the models import here, installed for
    that Python (ToolEnv.mirror, server/mirror.py)."""
    libdirs = [python.libdir, str(install.parent.parent / "nvidia_pytriton.libs")]
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    own = (
        [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
        if here == python.python
        else [str(python.mirror)]  # what the models import here, for this Python (toolenv)
        if python.mirror
        else []
    )
    return {
        "LD_LIBRARY_PATH": ":".join(
            [d for d in libdirs if d] + [env.get("LD_LIBRARY_PATH", "")]
        ).rstrip(":"),
        # NOTE: for the model's own subprocesses: the stub itself ignores PYTHONPATH (it runs with
        # -E)
        "PYTHONPATH": os.pathsep.join([str(python.site_packages), *own]),
        toolenv.STUB_PATH_VAR: os.pathsep.join(dict.fromkeys(own)),
        "PATH": f"{python.bin}{os.pathsep}{env.get('PATH', '')}",
        "VIRTUAL_ENV": str(python.path),
    }


@dataclass(frozen=True)
class ContainerLauncher:
    """tritonserver in a container of the fleet's image (e.g.
    nvcr.io/nvidia/tritonserver:24.10-py3), as NGC documents it: the repository mounted at /models
    (read-only), the image's tritonserver and its backends, its ports published on the loopback
    address; GPUs passed when this machine has them. docker run in the foreground forwards SIGINT to
    the server; the container is removed when it stops (--rm, and rm -f after)."""

    engine: str
    image: str
    chosen: bool = True

    @property
    def bundled(self) -> bool:
        return False

    def describe(self) -> str:
        return f"in {self.engine} image {self.image}"

    def name(self, ports: tuple[int, int, int]) -> str:
        return f"tritonbuild-{os.getpid()}-{ports[0]}"

    def command(
        self,
        repository: str,
        scratch: Path,
        ports: tuple[int, int, int],
        options: list[str],
        gpus: bool | None = None,
    ) -> list[str]:
        if gpus is None:
            gpus = shutil.which("nvidia-smi") is not None
        local = not is_url(repository)
        published = [
            arg
            for host, inside in zip(ports, CONTAINER_PORTS, strict=True)
            for arg in ("-p", f"127.0.0.1:{host}:{inside}")
        ]
        return [
            self.engine,
            "run",
            "--rm",
            "--name",
            self.name(ports),
            *(["--gpus=all"] if gpus else []),
            "--shm-size=1g",
            "-e",
            "PYTHONDONTWRITEBYTECODE=1",
            *(arg for name in passed_env() if name in os.environ for arg in ("-e", name)),
            *published,
            *(["-v", f"{repository}:{CONTAINER_REPOSITORY}:ro"] if local else []),
            self.image,
            "tritonserver",
            f"--model-repository={CONTAINER_REPOSITORY if local else repository}",
            *options,
        ]

    def env(self) -> dict:
        return dict(os.environ)

    def python_side(self) -> dict:
        """The image's own Python runs: not known here."""
        return python_side(None, None, None, own=True)

    def stopped(self, ports: tuple[int, int, int]) -> None:
        """A docker CLI killed before the server stopped would leave the container running: remove
        it by name."""
        import subprocess

        subprocess.run(
            [self.engine, "rm", "-f", self.name(ports)],
            capture_output=True,
            timeout=60,
            check=False,
        )
