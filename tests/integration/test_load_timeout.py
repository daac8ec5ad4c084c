"""A model whose load never reports back (a Python stub stuck in initialize, e.g. waiting on a file it cannot
find) no longer hangs verify: --load-timeout bounds the load, its row FAILs naming the model and what the
server log says of it, exit 6, and no tritonserver or stub is left running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import PY_MODEL, PY_RECIPE

pytestmark = [pytest.mark.triton]

STUCK = PY_MODEL.replace(
    "class TritonPythonModel:",
    """class TritonPythonModel:
    def initialize(self, args):
        import os, time
        print("waiting for weights.bin", flush=True)
        while not os.path.exists(os.path.join(args["model_repository"], "weights.bin")):
            time.sleep(0.2)
""",
)


def _running_under(repository: Path) -> list[str]:
    """Command lines of live processes naming this repository (tritonserver, or a stub of one of its models)."""
    needle = str(repository.resolve()).encode()
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
                if needle in cmd and b"pytest" not in cmd:
                    found.append(cmd.replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return found


def test_a_load_that_never_answers_fails_within_load_timeout(cli, write, tmp_path):
    write("model.py", STUCK)
    recipe = write(
        "stuck.yaml",
        PY_RECIPE.replace("name: doubler", "name: stuck").replace(
            "goldens/doubler.npz", "goldens/stuck.npz"
        ),
    )
    out = tmp_path / "out"
    assert cli("build", recipe, "-o", out).exit_code == 0
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "tritonbuild", "verify", str(out), "--json", "--load-timeout", "8"],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    took = time.monotonic() - t0
    assert r.returncode == 6, (r.returncode, r.stderr[-2000:])
    assert took < 120, took  # 8 s of load, the server's start and stop; it hung forever before
    report = json.loads(r.stdout)
    (row,) = report["models"]
    assert row["name"] == "stuck" and not row["passed"] and not row["loaded"]
    assert "did not finish loading 'stuck' within 8 s" in row["load_error"], row["load_error"]
    assert "server log" in row["load_error"], row["load_error"]
    assert "Traceback" not in r.stderr
    deadline = time.monotonic() + 10
    while _running_under(out) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _running_under(out), _running_under(out)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("tritonbuild-server-")]


def test_load_timeout_must_be_positive(cli, tmp_path):
    r = cli("verify", tmp_path, "--load-timeout", "0")
    assert r.exit_code == 2 and "--load-timeout" in r.stderr
