"""Which tritonserver binary runs, with which backend directory and environment: one launcher for the embedded
server (nvidia-pytriton's bundled binary) and for the fleet's own (`--tritonserver PATH`, a local install such as
/opt/tritonserver/bin/tritonserver), so verify, serve, tune and infer start either the same way.

An install is recognised by its layout: nvidia-pytriton's (`<install>/python_backend_stubs/`) gets a private
backend directory with the Python-backend stub built for the running interpreter, libpython on LD_LIBRARY_PATH and
this environment's site-packages on PYTHONPATH; any other install (Triton's own: `<install>/bin/tritonserver`,
`<install>/backends/`) runs with its own backends and its own Python stub, in the caller's environment.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from tritonbuild.core.stores import is_url
from tritonbuild.errors import UsageError, VerifyError

ENGINES = ("docker", "podman")
# Inside the NGC image (server docs/getting_started/quickstart.md): the repository mounted at /models, the
# image's tritonserver on its default ports; tests/contracts/facts/triton_container.json records the usage.
CONTAINER_REPOSITORY = "/models"
CONTAINER_PORTS = (8000, 8001, 8002)
# Credentials a cloud repository needs inside the container, passed by name (docker -e NAME: the value never
# appears on the command line)
_PASSED_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_PROFILE",
               "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY")


# Triton's rule for a Python-based backend (e.g. the vLLM backend): <backend-directory>/<name>/model.py, run by the
# Python backend's stub (core: a backend directory without libtriton_<name>.so but with a model.py)
BACKEND_ENTRY = "model.py"


class ServerStartError(VerifyError):
    pass


def pytriton_dir() -> Path:
    """nvidia-pytriton's bundled server, found without importing pytriton (its client stack needs gevent, zmq)."""
    import importlib.util

    spec = importlib.util.find_spec("pytriton")
    if (spec is None or not spec.submodule_search_locations) and sys.version_info >= (3, 13):
        raise ServerStartError("the embedded tritonserver is not available on Python 3.13: its Python-backend stub "
                               "needs numpy < 2, which has no wheel for Python 3.13 (so tritonbuild[embedded] "
                               "installs nothing here)",
                               hint="verify against a running server with --server URL (e.g. 'tritonbuild serve OUT' "
                                    "from a Python 3.10-3.12 environment), or pass --tritonserver PATH, or use "
                                    "Python 3.10-3.12")
    if spec is None or not spec.submodule_search_locations:
        raise ServerStartError("nvidia-pytriton is not installed: it provides the embedded tritonserver",
                               hint="pip install 'tritonbuild[embedded]' (nvidia-pytriton), pass --tritonserver PATH "
                                    "(your own tritonserver), or --server URL")
    return Path(next(iter(spec.submodule_search_locations))) / "tritonserver"


def launcher_for(tritonserver: str | Path | None) -> Launcher | ContainerLauncher:
    """The launcher `--tritonserver` names: a local binary, 'docker:IMAGE' / 'podman:IMAGE' for a container of
    that image, or None for the embedded one."""
    if tritonserver is None:
        return Launcher(pytriton_dir() / "bin" / "tritonserver", False)
    engine, sep, image = str(tritonserver).partition(":")
    if sep and engine in ENGINES and image:
        return ContainerLauncher(engine, image)
    return Launcher(checked_binary(tritonserver), True)


def checked_binary(binary: str | Path) -> Path:
    path = Path(binary).expanduser()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise UsageError(f"--tritonserver {binary}: {'not an executable file' if path.exists() else 'no such file'}",
                         hint="pass the tritonserver binary itself, e.g. /opt/tritonserver/bin/tritonserver")
    return path.resolve()


@dataclass(frozen=True)
class Launcher:
    binary: Path
    chosen: bool  # given with --tritonserver (else the embedded one)

    def command(self, repository: str, scratch: Path, ports: tuple[int, int, int], options: list[str]) -> list[str]:
        """tritonserver's argv: this binary on the loopback ports."""
        backends = self.backend_dir(scratch)
        http, grpc, metrics = ports
        return [str(self.binary), f"--model-repository={repository}",
                *([f"--backend-directory={backends}"] if backends is not None else []),
                "--http-address=127.0.0.1", f"--http-port={http}", "--grpc-address=127.0.0.1",
                f"--grpc-port={grpc}", "--metrics-address=127.0.0.1", f"--metrics-port={metrics}", *options]

    def stopped(self, ports: tuple[int, int, int]) -> None:
        """Nothing outlives the process group a local binary runs in."""

    @property
    def install(self) -> Path:
        return self.binary.parent.parent

    @property
    def bundled(self) -> bool:
        """nvidia-pytriton's layout: the Python stub is ours to place, for this interpreter."""
        return (self.install / "python_backend_stubs").is_dir()

    def describe(self) -> str:
        return "embedded" if not self.chosen else f"at {self.binary}"

    def backend_dir(self, scratch: Path) -> Path | None:
        """The --backend-directory to pass (None: the install's own default)."""
        if not self.bundled:
            own = self.install / "backends"
            return own if own.is_dir() else None
        stub = self.install / "python_backend_stubs" / f"{sys.version_info.major}.{sys.version_info.minor}" / \
            "triton_python_backend_stub"
        if not stub.is_file():
            raise ServerStartError(f"no Python-backend stub for Python {sys.version_info[:2]} in {self.install}",
                                   hint="use Python 3.8-3.13")
        dest = scratch / "backends" / "python"
        shutil.copytree(self.install / "backends" / "python", dest, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(stub, dest / "triton_python_backend_stub")
        os.chmod(dest / "triton_python_backend_stub", 0o755)
        return dest.parent

    def env(self) -> dict:
        env = dict(os.environ)
        # NOTE: for the model's own subprocesses; the stub's interpreter ignores the environment
        # (sys.flags.ignore_environment) and writes __pycache__/ beside model.py: EmbeddedServer removes those.
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if not self.bundled:
            return env  # the install's own stub and Python, as the fleet runs it
        libdirs = [sysconfig.get_config_var("LIBDIR") or "", str(self.install.parent.parent / "nvidia_pytriton.libs")]
        env["LD_LIBRARY_PATH"] = ":".join([d for d in libdirs if d] + [env.get("LD_LIBRARY_PATH", "")]).rstrip(":")
        env["PYTHONPATH"] = os.pathsep.join([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        if sys.prefix != sys.base_prefix:
            env["VIRTUAL_ENV"] = sys.prefix
        else:
            env.pop("VIRTUAL_ENV", None)
        return env


@dataclass(frozen=True)
class ContainerLauncher:
    """tritonserver in a container of the fleet's image (e.g. nvcr.io/nvidia/tritonserver:24.10-py3), as NGC
    documents it: the repository mounted at /models (read-only), the image's tritonserver and its backends, its
    ports published on the loopback address; GPUs passed when this machine has them. docker run in the
    foreground forwards SIGINT to the server; the container is removed when it stops (--rm, and rm -f after)."""

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

    def command(self, repository: str, scratch: Path, ports: tuple[int, int, int], options: list[str],
                gpus: bool | None = None) -> list[str]:
        if gpus is None:
            gpus = shutil.which("nvidia-smi") is not None
        local = not is_url(repository)
        published = [arg for host, inside in zip(ports, CONTAINER_PORTS, strict=True)
                     for arg in ("-p", f"127.0.0.1:{host}:{inside}")]
        return [self.engine, "run", "--rm", "--name", self.name(ports), *(["--gpus=all"] if gpus else []),
                "--shm-size=1g", "-e", "PYTHONDONTWRITEBYTECODE=1",
                *(arg for name in _PASSED_ENV if name in os.environ for arg in ("-e", name)), *published,
                *(["-v", f"{repository}:{CONTAINER_REPOSITORY}:ro"] if local else []), self.image,
                "tritonserver", f"--model-repository={CONTAINER_REPOSITORY if local else repository}", *options]

    def env(self) -> dict:
        return dict(os.environ)

    def stopped(self, ports: tuple[int, int, int]) -> None:
        """A docker CLI killed before the server stopped would leave the container running: remove it by name."""
        import subprocess

        subprocess.run([self.engine, "rm", "-f", self.name(ports)], capture_output=True, timeout=60, check=False)
