"""Ctrl-C during verify never leaves a tritonserver (or its Python stubs) running, nor its temp dir."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.triton, pytest.mark.slow]


def _servers_for(repository: Path) -> list[int]:
    """pids of processes whose command line names this repository (tritonserver, or a stub it started)."""
    needle = f"--model-repository={repository.resolve()}".encode()
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if needle in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
            except OSError:
                continue
    return found


def sigint_default() -> None:
    """The child gets Ctrl-C's default action even when this test runs with SIGINT ignored (a background job of a
    non-interactive shell inherits SIG_IGN, and tritonbuild rightly leaves an ignored SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_at_any_moment_of_verify_leaves_no_server_and_no_temp_dir(cli, py_recipe, tmp_path):
    out = tmp_path / "out"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    assert cli("verify", out, "--record").exit_code == 0  # goldens: a full verify has every phase
    t0 = time.monotonic()
    full = subprocess.run(
        [sys.executable, "-m", "tritonbuild", "verify", str(out)],
        capture_output=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    took = time.monotonic() - t0
    assert full.returncode == 0, full.stderr
    codes = []
    # NOTE: moments spread over the run: interpreter start, server start, model load, inference, shutdown
    for i, frac in enumerate((0.1, 0.25, 0.4, 0.55, 0.7, 0.85)):
        tmp = tmp_path / f"tmp{i}"
        tmp.mkdir()
        proc = subprocess.Popen(
            [sys.executable, "-m", "tritonbuild", "verify", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "TMPDIR": str(tmp)},
            preexec_fn=sigint_default,
        )
        time.sleep(took * frac)
        proc.send_signal(signal.SIGINT)
        try:
            _, stderr = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"verify did not stop within 90 s of SIGINT at {frac:.0%} of its run")
        codes.append(proc.returncode)
        # NOTE: -SIGINT: the signal came while the interpreter was exiting after the work was done (Python has
        # restored the default handler by then); a shell reports it as 130 too
        assert proc.returncode in (0, 130, -signal.SIGINT), stderr.decode()[-2000:]
        assert b"Traceback" not in stderr, stderr.decode()[-2000:]
        deadline = time.monotonic() + 5
        while _servers_for(out) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _servers_for(out) == [], f"tritonserver left running after SIGINT at {frac:.0%}"
        assert [p.name for p in tmp.iterdir() if p.name.startswith("tritonbuild")] == [], (
            f"temp dir left after SIGINT at {frac:.0%}"
        )
    assert 130 in codes  # at least some of the moments really interrupted it
