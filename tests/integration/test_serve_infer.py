"""serve's ports, control mode and kept log; infer against a served URL and a built directory (issue #12)."""
import json
import os
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.triton


def _built(cli, py_recipe, tmp_path):
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    r = cli("verify", out, "--record")
    assert r.exit_code == 0, r.stderr
    return out


def test_serve_poll_mode_then_infer_the_url_with_goldens_and_with_an_npy(cli, py_recipe, tmp_path):
    out = _built(cli, py_recipe, tmp_path)
    log = tmp_path / "server.log"
    proc = subprocess.Popen([sys.executable, "-m", "tritonbuild", "serve", str(out), "--json", "--http-port", "0",
                             "--grpc-port", "0", "--metrics-port", "0", "--model-control-mode", "poll",
                             "--log-file", str(log), "--log-verbose", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ})
    try:
        info = json.loads("".join(iter(proc.stdout.readline, "}\n")) + "}")
        assert info["model_control_mode"] == "poll" and info["log"] == str(log)
        r = cli("infer", info["http"], "doubler", "--goldens", out, "--json")
        assert r.exit_code == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["samples"] and all(s["golden"] == "bit-exact" for s in doc["samples"])
        np.save(tmp_path / "x.npy", np.array([[1, 2, 3]], np.float32))
        r = cli("infer", info["http"], "doubler", "--input", f"X={tmp_path / 'x.npy'}")
        assert r.exit_code == 0, r.stderr
        assert "Y  float32 [1, 3]" in r.stdout and "[[3. 5. 7.]]" in r.stdout
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert log.stat().st_size > 0  # the log outlives the server (it used to die with its temp dir)


def test_infer_a_built_directory_serves_it_for_the_call(cli, py_recipe, tmp_path):
    out = _built(cli, py_recipe, tmp_path)
    r = cli("infer", out, "doubler")
    assert r.exit_code == 0, r.stderr
    assert "golden: bit-exact" in r.stdout
    r = cli("infer", out, "nope")
    assert r.exit_code == 2 and "has no model 'nope'" in r.stderr


def test_serve_failure_names_the_kept_log(cli, py_recipe, tmp_path):
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = subprocess.run([sys.executable, "-m", "tritonbuild", "serve", str(out), "--http-port", str(port),
                              "--grpc-port", "0", "--metrics-port", "0", "--log-file", str(tmp_path / "s.log")],
                             capture_output=True, text=True, timeout=120)
    assert res.returncode == 6, res.stderr
    assert f"see the server log {tmp_path / 's.log'}" in res.stderr
    assert (tmp_path / "s.log").is_file() and (tmp_path / "s.log").stat().st_size > 0
