"""Start and stop a tritonserver (nvidia-pytriton's, or --tritonserver PATH: server/launcher.py): loopback ports,
explicit model control.

See docs/FACTS in the brief: the Python-backend stub for its interpreter must sit in the backend directory,
libpython must be on LD_LIBRARY_PATH, and the stub imports its environment's numpy, which must be < 2: the
embedded server's Python side is an environment tritonbuild makes for it (server/toolenv.py), never the user's.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tritonbuild.core.stores import is_url
from tritonbuild.server.launcher import (
    BACKEND_ENTRY,
    ContainerLauncher,
    Launcher,
    ServerStartError,
    launcher_for,
)
from tritonbuild.server.loading import LOAD_TIMEOUT_S, ModelLoadError, load_log_cause, load_model
from tritonbuild.server.numerics import manifest_numerics
from tritonbuild.server.ports import free_ports, lost_port, taken_ports
from tritonbuild.triton.client import Server, is_live, server_version

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
PORT_TRIES = 3  # starts with newly picked ports when one was taken before the server bound it
KILL_WAIT_S = 10.0  # after SIGKILL: how long stop() waits for the process to go (never forever)


def _die_with_parent() -> None:
    # NOTE: PR_SET_PDEATHSIG: if tritonbuild is killed outright, the server gets SIGTERM instead of
    # becoming an orphan holding ports.
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


class EmbeddedServer:
    """Context manager: tritonserver on free loopback ports; always stopped on exit (errors and Ctrl-C too)."""

    def __init__(
        self,
        repository: Path | str,
        *,
        control: str = "explicit",
        log_path: Path | None = None,
        ready_timeout: float = READY_TIMEOUT_S,
        poll_secs: int = 1,
        ports: tuple[int, int, int] | None = None,
        log_verbose: int = 0,
        launcher: Launcher | ContainerLauncher | None = None,
        backends: dict[str, Path] | None = None,
        env: dict[str, str] | None = None,
        wheels: list[Path] | None = None,
        strict_readiness: bool = True,
        options: list[str] | None = None,
    ):
        """ports: (http, grpc, metrics); 0 or None picks a free loopback port. launcher: which tritonserver runs
        (server/launcher.py: launcher_for(--tritonserver)); None: the embedded one. backends: Python-based
        backends served beside the python backend (name → a directory holding its model.py, e.g. Triton's vLLM
        backend), placed as <backend-directory>/<name>/ (the embedded server only). env: variables the models'
        runtime needs (a vLLM model's VLLM_BATCH_INVARIANT); wheels: pure-Python wheels its Python must import (a
        vLLM plugin), unpacked for this server into a directory its interpreters see (the embedded server only).
        strict_readiness: False passes --strict-readiness=false, so /v2/health/ready does not drop while a model
        loads (a publish reaching a polling server); the models' own readiness then tells what is served. options:
        more tritonserver options (verify/triton_core.py's for a server of stand-ins only)."""
        # A local directory, or a URL tritonserver reads itself (s3://http://host:port/bucket/prefix, gs://, as://).
        self.repository = str(repository) if is_url(repository) else str(Path(repository).resolve())
        self.control = control
        self.poll_secs = poll_secs
        self.ready_timeout = ready_timeout
        # NOTE: the temp dir is made in start(), where an interrupt is cleaned up, never in between.
        self._tmp: Path | None = None
        self._log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.unreaped: int | None = (
            None  # a killed server's pid that had not exited KILL_WAIT_S later
        )
        self.started_env: dict | None = None
        self.http_port = self.grpc_port = self.metrics_port = 0
        self.ports = ports or (0, 0, 0)
        self.log_verbose = log_verbose
        self.launcher = launcher or launcher_for()
        self.backends = {name: Path(path) for name, path in (backends or {}).items()}
        self.env = dict(env or {})
        self.wheels = [Path(wheel) for wheel in (wheels or [])]
        self.strict_readiness = strict_readiness
        self.options = list(options or [])
        # explicit control: the models loaded as the server starts (--load-model), before it listens, so its
        # readiness never answers while they load; check_loaded() then names any that failed
        self.startup_models: list[str] = []
        self.version: str | None = None  # GET /v2 once live
        self._bytecode_before: set[Path] | None = (
            None  # set at start: only what this server wrote is removed
        )

    @property
    def log_path(self) -> Path:
        return self._log_path or (self._tmp or Path(tempfile.gettempdir())) / "tritonserver.log"

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def describe(self) -> str:
        """Which tritonserver answered, for every result: 'tritonserver 2.51.0 embedded' or '... at PATH'."""
        return f"tritonserver {self.version or '?'} {self.launcher.describe()}"

    def argv(self) -> list[str]:
        options = [
            f"--model-control-mode={self.control}",
            "--exit-on-error=false",
            f"--log-verbose={self.log_verbose}",
            # NOTE: a distinct shared-memory prefix per server, so concurrent servers never collide.
            f"--backend-config=python,shm-region-prefix-name=tb{os.getpid()}x{self.http_port}",
        ]
        if self.control == "poll":
            options.append(f"--repository-poll-secs={self.poll_secs}")
        if self.control == "explicit":
            options += [f"--load-model={name}" for name in self.startup_models]
        if not self.strict_readiness:
            options.append("--strict-readiness=false")
        options += self.options
        command = self.launcher.command(
            self.repository, self._tmp, (self.http_port, self.grpc_port, self.metrics_port), options
        )
        self._place_backends()
        return command

    def _place_backends(self) -> None:
        """The Python-based backends given (serve --backend NAME=DIR) beside the embedded server's python backend."""
        if self.backends and not self.launcher.bundled:
            raise ServerStartError(
                f"--backend {', '.join(self.backends)}: only the embedded tritonserver takes a "
                "backend directory from here; this one uses its install's backends/",
                hint=f"install it there as backends/<name>/{BACKEND_ENTRY}",
            )
        for name, path in self.backends.items():
            if not (path / BACKEND_ENTRY).is_file():
                raise ServerStartError(
                    f"backend {name!r}: {path} holds no {BACKEND_ENTRY}",
                    hint="give the directory of a Python-based backend (its model.py and modules)",
                )
            shutil.copytree(
                path,
                self._tmp / "backends" / name,
                ignore=shutil.ignore_patterns("__pycache__"),
                dirs_exist_ok=True,
            )

    def _env(self) -> dict:
        """The launcher's environment, with the models' variables and the unpacked wheels on the stub's path (the
        stub ignores PYTHONPATH: the tool environment's .pth reads TRITONBUILD_STUB_PATH; PYTHONPATH for the model's
        own subprocesses, e.g. vLLM's engine core)."""
        env = {**self.launcher.env(), **manifest_numerics(self.repository), **self.env}
        if self.wheels:
            if not self.launcher.bundled:
                raise ServerStartError(
                    f"{', '.join(w.name for w in self.wheels)}: only the embedded tritonserver "
                    "takes packages from here; this one uses its install's Python",
                    hint="pip install those wheels (in the model's plugins/ directory) into it",
                )
            from tritonbuild.server.toolenv import (
                STUB_PATH_VAR,
                installed_wheel,
                sees_stub_path,
                unpack_wheels,
            )

            python = self.launcher.tool_env()
            missing = [wheel for wheel in self.wheels if not installed_wheel(python, wheel)]
            if missing and not sees_stub_path(python):
                raise ServerStartError(
                    f"{', '.join(w.name for w in missing)}: the server's Python environment "
                    f"{python.path} is used as it is and does not import from here",
                    hint=f"pip install --no-deps {' '.join(str(w) for w in missing)} into it",
                )
            if not missing:
                return env  # installed there already (pip install of the same wheel)
            site = str(unpack_wheels(missing, self._tmp / "site"))
            for var in (STUB_PATH_VAR, "PYTHONPATH"):
                env[var] = os.pathsep.join(filter(None, [site, env.get(var, "")]))
        return env

    def start(self) -> EmbeddedServer:
        """Start and wait until live; on any failure or interrupt, nothing is left running or on disk."""
        try:
            return self._start()
        except ServerStartError:
            raise  # stopped already; the log stays for the message's hint
        except BaseException:
            self.cleanup()
            raise

    def _start(self) -> EmbeddedServer:
        if self._bytecode_before is None:
            self._bytecode_before = self._bytecode_dirs()
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="tritonbuild-server-"))
        taken = taken_ports(self.ports)
        if taken:
            names = dict(
                zip(self.ports, ("--http-port", "--grpc-port", "--metrics-port"), strict=True)
            )
            raise ServerStartError(
                f"port {', '.join(map(str, taken))} on 127.0.0.1 is already in use (another "
                "tritonserver?): nothing was started",
                hint=f"stop what listens there, or pass another port ({names[taken[0]]} 0 "
                "picks a free one)",
            )
        for attempt in itertools.count(1):
            picked = iter(free_ports(self.ports.count(0), frozenset(self.ports) - {0}))
            self.http_port, self.grpc_port, self.metrics_port = (
                port or next(picked) for port in self.ports
            )
            try:
                return self._launch()
            except ServerStartError:
                if attempt == PORT_TRIES or not self._lost_a_picked_port():
                    raise
            # the next start places its backends afresh
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = Path(tempfile.mkdtemp(prefix="tritonbuild-server-"))

    def _lost_a_picked_port(self) -> bool:
        """Whether the server just stopped found a port start picked in use (taken by another process between the
        pick and its bind: server/ports.py); a port the caller gave is never picked again."""
        try:
            service = lost_port(self.log_path.read_text(errors="replace"))
        except OSError:
            return False
        given = dict(zip(("HTTP", "GRPC", "Metrics"), self.ports, strict=True))
        return service is not None and given.get(service) == 0

    def _launch(self) -> EmbeddedServer:
        argv = self.argv()
        self.started_env = self._env()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.started_env,
                cwd=self._tmp,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        atexit.register(self.stop)
        # NOTE: tritonserver listens once its startup models have loaded (or failed): their loads count too
        waits = self.ready_timeout + LOAD_TIMEOUT_S * len(
            self.startup_models if self.control == "explicit" else []
        )
        deadline = time.monotonic() + waits
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail, code = (
                    self.log_tail(),
                    self.proc.returncode,
                )  # NOTE: read before stop() drops self.proc
                self.stop()
                raise ServerStartError(
                    f"tritonserver exited with code {code} while starting:\n{tail}",
                    hint=f"see the server log {self.log_path}",
                )
            if is_live(self.http_url):
                self.version = server_version(self.http_url)
                return self
            time.sleep(0.1)
        self.stop()
        raise ServerStartError(
            f"tritonserver not live after {waits:.0f}s:\n{self.log_tail()}",
            hint=f"see the server log {self.log_path}",
        )

    def log_tail(self, n: int = 30) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        usage = next(
            (i for i, line in enumerate(lines) if line.startswith("Usage: tritonserver")), None
        )
        if usage is not None:
            # a refused command line: its reason is above the usage text or, for a check made
            # after parsing (one port given twice), its last line
            after = [line for line in lines[usage:] if line.strip()][-1:]
            reason = [line for line in after if not line.startswith((" ", "\t"))]
            return "\n".join(
                [*lines[max(0, usage - n) : usage], "(then tritonserver's usage text)", *reason]
            )
        return "\n".join(lines[-n:])

    def load(self, model: str, timeout: float = LOAD_TIMEOUT_S) -> None:
        try:
            load_model(f"http://{self.http_url}", model, timeout=timeout)
        except ModelLoadError as e:
            if e.timed_out:
                e.message += f"; {load_log_cause(self.log_path, model)}"
            raise

    def check_loaded(self, models: list[str]) -> None:
        """Each of models READY in the repository index; one that is not (a failed startup load: the server goes
        on without it under --exit-on-error=false) is loaded again through the API, whose refusal carries Triton's
        own message (the index has none for a config it cannot parse): a ModelLoadError."""
        with Server(f"http://{self.http_url}", LOAD_TIMEOUT_S) as server:
            ready = {e.get("name") for e in server.index() if e.get("state") == "READY"}
        for model in models:
            if model not in ready:
                self.load(model)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGINT)
                proc.wait(timeout=STOP_TIMEOUT_S)
            except ProcessLookupError:
                pass
            except BaseException as e:
                # NOTE: too slow, or a second Ctrl-C while it shuts down: kill the whole group, never leave it.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                self._reap(proc)
                if not isinstance(e, subprocess.TimeoutExpired):
                    raise
        if proc is not None:
            self.launcher.stopped((self.http_port, self.grpc_port, self.metrics_port))
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)

    def _reap(self, proc: subprocess.Popen) -> None:
        """Wait for a killed server, at most KILL_WAIT_S: a process can outlive SIGKILL for a while (one in
        uninterruptible sleep, or still writing its core dump), and stopping must never hang on it: it is then
        named in self.unreaped and left to the system."""
        try:
            proc.wait(timeout=KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            self.unreaped = proc.pid

    def _bytecode_dirs(self) -> set[Path]:
        """The __pycache__/ directories under the models' version directories of a local repository."""
        if is_url(self.repository):
            return set()
        return set(Path(self.repository).glob("*/*/**/__pycache__"))

    def cleanup(self) -> None:
        """Stop; then remove the __pycache__/ the Python stub wrote beside model.py (its interpreter ignores
        PYTHONDONTWRITEBYTECODE), so a served or inferred repository is left as it was found."""
        try:
            self.stop()
            if self._bytecode_before is not None:
                for made in self._bytecode_dirs() - self._bytecode_before:
                    shutil.rmtree(made, ignore_errors=True)
        finally:
            tmp, self._tmp = self._tmp, None
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.cleanup()
