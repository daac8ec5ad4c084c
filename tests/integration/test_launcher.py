"""--tritonserver PATH: verify, serve, infer and tune start a local tritonserver binary through the same launcher
as the embedded one (server/launcher.py), and every result names the server that answered (version, binary).
Run here with the embedded server's own binary, and with that binary laid out as a Triton install
(<install>/bin/tritonserver, <install>/backends/python with its stub), started in the environment such an install
needs, as a fleet machine provides it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.serving import serve_json, stop_serve
from tests.timing import limit

pytestmark = pytest.mark.triton


def _binary():
    from tritonbuild.server.launcher import pytriton_dir

    return pytriton_dir() / "bin" / "tritonserver"


def _recorded(cli, py_recipe, tmp_path):
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    assert cli("verify", out, "--record").exit_code == 0
    return out


def test_verify_serve_and_infer_through_a_given_binary(cli, py_recipe, tmp_path):
    binary = _binary()
    out = _recorded(cli, py_recipe, tmp_path)
    r = cli("verify", out, "--tritonserver", binary, "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    (model,) = json.loads(r.stdout)["models"]
    assert model["route_detail"] == f"tritonserver 2.51.0 at {binary}"
    r = cli("verify", out, "--json")
    assert json.loads(r.stdout)["models"][0]["route_detail"] == "tritonserver 2.51.0 embedded"
    r = cli("infer", out, "doubler", "--tritonserver", binary)
    assert r.exit_code == 0 and "golden: bit-exact" in r.stdout, r.stderr
    proc, info = serve_json(str(out), "--tritonserver", str(binary))
    try:
        assert (
            info["tritonserver"] == f"tritonserver 2.51.0 at {binary}"
            and info["version"] == "2.51.0"
        )
        assert info["loaded"] == ["doubler"]
    finally:
        stop_serve(proc)


def test_a_triton_install_layout_runs_with_its_own_backends(cli, py_recipe, tmp_path):
    """<install>/bin/tritonserver with <install>/backends/python (library, utils, stub): the launcher passes that
    backend directory and leaves the environment to the install (no private stub, no PYTHONPATH of ours)."""
    from tritonbuild.server.launcher import pytriton_dir

    src = pytriton_dir()
    install = tmp_path / "opt" / "tritonserver"
    (install / "bin").mkdir(parents=True)
    shutil.copy2(src / "bin" / "tritonserver", install / "bin" / "tritonserver")
    shutil.copytree(
        src / "backends" / "python",
        install / "backends" / "python",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    shutil.copy2(
        src / "python_backend_stubs" / version / "triton_python_backend_stub",
        install / "backends" / "python" / "triton_python_backend_stub",
    )
    out = _recorded(cli, py_recipe, tmp_path)
    # what a machine with this install sets: its libraries and the Python its stub imports numpy from
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": f"{sysconfig.get_config_var('LIBDIR')}:"
        f"{src.parent.parent / 'nvidia_pytriton.libs'}",
        "PYTHONPATH": sysconfig.get_paths()["purelib"],
        "VIRTUAL_ENV": sys.prefix,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tritonbuild",
            "verify",
            str(out),
            "--json",
            "--tritonserver",
            str(install / "bin" / "tritonserver"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=limit(35),  # the whole test: 35 s (2026-12-06, beside other jobs)
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (model,) = json.loads(r.stdout)["models"]
    assert model["route_detail"] == f"tritonserver 2.51.0 at {install / 'bin' / 'tritonserver'}"
    assert model["passed"] and model["batch_invariance"] == "invariant"


TUNE = """tune:
  batch_sizes: [4]
  max_queue_delay_us: [0]
  instance_counts: [1]
  concurrency: [1]
  window_s: 0.3
  stable_windows: 2
  max_windows: 4
  stability: 0.5
  min_vs_default: 0.1
  sla_p99_ms: 5000
"""


def test_tune_through_a_given_binary_names_it_in_the_report(cli, py_recipe, tmp_path):
    binary = _binary()
    py_recipe.write_text(py_recipe.read_text() + TUNE)
    out = _recorded(cli, py_recipe, tmp_path)
    r = cli(
        "tune",
        out,
        "doubler",
        "--tritonserver",
        binary,
        "--processes",
        "1",
        "--concurrency",
        "1",
        "--report-dir",
        tmp_path / "rep",
    )
    assert r.exit_code in (0, 6), r.output
    report = json.loads((tmp_path / "rep" / "tune-report.json").read_text())
    assert report["server"] == {"tritonserver": "2.51.0", "launched": f"at {binary}"}


def test_a_tritonserver_that_is_not_an_executable_is_a_usage_error(cli, py_recipe, tmp_path):
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    r = cli("verify", out, "--tritonserver", tmp_path / "nope")
    assert r.exit_code == 2 and "--tritonserver" in r.stderr and "no such file" in r.stderr
