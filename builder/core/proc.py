"""Run an external step as a subprocess: timeout, a kept log, a reproduce.sh, the exit code
checked."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcResult:
    returncode: int
    log_path: Path
    timed_out: bool

    def tail(self, n: int = 20) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])


def run_logged(
    argv: list[str],
    *,
    cwd: Path,
    log_path: Path,
    env: dict | None = None,
    timeout: float | None = None,
) -> ProcResult:
    """Run argv with stdout+stderr going to log_path; write reproduce.sh beside the log."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    repro = log_path.with_name("reproduce.sh")
    env_part = " ".join(
        f"{k}={shlex.quote(v)}"
        for k, v in sorted((env or {}).items())
        if k.startswith(("PYTHON", "TRITONBUILD"))
    )
    repro.write_text(f"#!/bin/sh\ncd {shlex.quote(str(cwd))}\n{env_part} {shlex.join(argv)}\n")
    repro.chmod(0o755)
    full_env = {**os.environ, **(env or {})}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=timeout)
            return ProcResult(rc, log_path, False)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            return ProcResult(-9, log_path, True)
        except BaseException:
            os.killpg(proc.pid, 9)
            proc.wait()
            raise


# NOTE: Python 3.10 has no -P: drop sys.path[0] (the cwd, for -c) before running the module.
_NO_CWD_BOOTSTRAP = (
    "import runpy, sys; del sys.path[0]; module = sys.argv.pop(1); "
    "runpy.run_module(module, run_name='__main__', alter_sys=True)"
)


def python_module_argv(module: str, *args: str) -> list[str]:
    """argv for `python -m module args` in this interpreter that does not put the cwd (a recipe's
    directory, which may hold a user's own `tritonbuild/` or `builder/` folder) ahead of our
    installed packages."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module, *args]
    return [sys.executable, "-c", _NO_CWD_BOOTSTRAP, module, *args]
