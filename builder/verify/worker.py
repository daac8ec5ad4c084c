"""An in-process runner in a process of its own, started with the model's numerics variables
(portable numerics: MKL's reproducibility branch, ATen's and oneDNN's ISA, thread counts). Math
libraries read them once, when they load: tritonbuild's own process may have loaded them already
(a build, a static check), so a portable model is run where they are set from the start.

The parent sends pickled requests on the child's stdin and reads pickled replies from its stdout
(the child's own prints go to stderr); both ends are this module. Not multiprocessing: its spawned
children inherit the parent's environment and import the parent's __main__ (tritonbuild's CLI,
hence numpy and OpenBLAS) before an initializer could set the variables; a child started with its
own env= has them from its first instruction."""

from __future__ import annotations

import os
import pickle
import signal
import struct
import subprocess
import sys
from pathlib import Path

_HEADER = struct.Struct("<Q")


def _send(stream, message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _receive(stream):
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError("the worker process ended")
    (size,) = _HEADER.unpack(header)
    return pickle.loads(stream.read(size))


class WorkerError(RuntimeError):
    """The worker's runner raised: its type and message, as the in-process route reports them."""


def _ignore_interrupt() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class WorkerRunner:
    """The backend's in-process runner, in a child process with env added to this one's; numerics
    is the child's fingerprint, read after the runner loaded the model."""

    def __init__(self, backend: str, version_dir: Path, model, env: dict[str, str]):
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tritonbuild.verify.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, **env},
            # NOTE: Ctrl-C is the parent's: the child starts with SIGINT ignored (Python keeps an ignored SIGINT),
            # so an interrupt during its imports prints no traceback; the parent closes it (EOF ends it)
            preexec_fn=_ignore_interrupt,
        )
        self.numerics = self._ask("open", backend, str(version_dir), model.model_dump_json())

    def _ask(self, *message):
        try:
            _send(self._proc.stdin, message)
            status, value = _receive(self._proc.stdout)
        except (BrokenPipeError, EOFError):
            code = self._proc.wait()
            raise WorkerError(f"the worker process ended (exit {code})") from None
        if status == "ok":
            return value
        kind, text = value
        if kind == "ImportError":
            raise ImportError(text)
        raise WorkerError(f"{kind}: {text}")

    def infer(self, sample: dict) -> dict:
        return self._ask("infer", sample)

    def infer_concurrent(self, samples: list[dict]) -> list[dict]:
        return self._ask("infer_concurrent", samples)

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                _send(self._proc.stdin, ("close",))
                self._proc.wait(timeout=30)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            stream.close()


def in_process_runner(version_dir: Path, model):
    """The backend's in-process runner for the model: in a worker process of its own where the
    model's numerics are portable (the variables must be set before the math libraries load),
    else in this one."""
    if model.numerics:
        return WorkerRunner(model.backend, version_dir, model, model.numerics["env"])
    from tritonbuild.backends import REGISTRY

    return REGISTRY.for_manifest(model.backend).in_process_runner(version_dir, model)


def ran_on(runner) -> dict:
    """The numerics fingerprint of the process an in-process runner runs in."""
    from tritonbuild.core.numerics import fingerprint

    return getattr(runner, "numerics", None) or fingerprint(loaded_only=True)


def _serve(inbox, outbox) -> None:
    from tritonbuild.backends import REGISTRY
    from tritonbuild.core.numerics import fingerprint
    from tritonbuild.repository.manifest import ManifestModel

    runner = None
    while True:
        try:
            message = _receive(inbox)
        except EOFError:
            return
        kind, args = message[0], message[1:]
        if kind == "close":
            return
        try:
            if kind == "open":
                backend, version_dir, model_json = args
                model = ManifestModel.model_validate_json(model_json)
                runner = REGISTRY.for_manifest(backend).in_process_runner(Path(version_dir), model)
                reply = fingerprint(loaded_only=True)
            else:
                reply = getattr(runner, kind)(*args)
        except Exception as e:  # noqa: BLE001 - the parent reports it as the model's error
            _send(outbox, ("error", (type(e).__name__, str(e))))
            continue
        _send(outbox, ("ok", reply))


def main() -> None:
    inbox = sys.stdin.buffer
    outbox = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # NOTE: what the libraries print goes to stderr, never into the replies
    _serve(inbox, outbox)


if __name__ == "__main__":
    main()
