"""`python -m tritonbuild` and the `tritonbuild` console script: the CLI, with Ctrl-C always ending
in exit 130."""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import os
import signal
import sys

_interrupted = False
_code: int | None = None  # the exit code run() settled on


def _late_interrupt(_signum, _frame) -> None:
    global _interrupted
    _interrupted = True


def _ctrl_c(_signum, _frame) -> None:
    """SIGINT during a command: Python's KeyboardInterrupt, remembered on this handler (cli/interrupt.py's
    interrupted_by_ctrl_c reads it): a library that reports the interrupt as its own error without
    chaining it (pydantic-core building a model's serializer at import) would otherwise pass for a bug."""
    _ctrl_c.seen = True
    raise KeyboardInterrupt


_ctrl_c.seen = False


def _unraisable(hook) -> None:
    """sys.unraisablehook: a KeyboardInterrupt Python could not raise where the Ctrl-C landed (inside
    a weakref callback of an import's module lock, a __del__) is neither printed ("Exception
    ignored ... Traceback": seen in CI) nor lost (the command then ran to its end): SIGINT again, so
    the handler raises it at the next point where it can. Anything else: Python's own report."""
    if hook.exc_type is not None and issubclass(hook.exc_type, KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)
        return
    sys.__unraisablehook__(hook)


def _exit_now() -> None:
    """Registered before anything else, so it runs last at exit, after every other handler: ends the
    process with run()'s code, or 130 when a Ctrl-C arrived while Python was already exiting
    (joining threads, atexit handlers). Python's own finalization after this point restores SIGINT's
    default action, and a Ctrl-C there killed the process (signal 2): nothing is left to do, so it
    is skipped."""
    if (
        _code is None
    ):  # run() did not get to the end (the interpreter is dying another way): leave it alone
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(130 if _interrupted else _code)


def run() -> None:
    """The CLI (it maps Ctrl-C during a command to 130). Around it: a Ctrl-C during the imports is
    130 too, and one arriving once the command is done no longer raises KeyboardInterrupt at exit
    (which ended the process by signal 2): it only marks the exit 130."""
    global _interrupted, _code
    atexit.register(_exit_now)
    # `kill -USR1 PID`: every thread's stack on stderr (a command that hangs)
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    ignored = (
        signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    )  # a background job: leave it ignored
    code: int | str | None = 130
    if not ignored:
        signal.signal(signal.SIGINT, _ctrl_c)
        sys.unraisablehook = _unraisable
    try:
        try:
            from tritonbuild.cli import main

            main()
            code = 0
        finally:
            if not ignored:
                signal.signal(signal.SIGINT, _late_interrupt)
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:
        _interrupted = True
        print("interrupted", file=sys.stderr)
    if isinstance(code, str):  # sys.exit("message"): Python prints it and exits 1
        print(code, file=sys.stderr)
        code = 1
    _code = code or 0
    sys.exit(130 if _interrupted else _code)


if __name__ == "__main__":
    run()
