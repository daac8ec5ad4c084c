"""serve's ports, control mode and kept log; infer against a served URL and a built directory."""

import json
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from tests.serving import serve_json, stop_serve
from tests.timing import limit
from tritonbuild.server.ports import free_port, free_ports

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
    proc, info = serve_json(
        str(out), "--model-control-mode", "poll", "--log-file", str(log), "--log-verbose", "1"
    )
    try:
        assert info["model_control_mode"] == "poll" and info["log"] == str(log)
        r = cli("infer", info["http"], "doubler", "--goldens", out, "--json")
        assert r.exit_code == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["samples"] and all(s["golden"] == "bit-exact" for s in doc["samples"])
        np.save(tmp_path / "x.npy", np.array([[1, 2, 3]], np.float32))
        r = cli("infer", info["http"], "doubler", "--input", f"X={tmp_path / 'x.npy'}")
        assert r.exit_code == 0, r.stderr
        assert "Y  float32 [1, 3]" in r.stdout and "[[3. 5. 7.]]" in r.stdout
        assert stop_serve(proc) == 0
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
    # a built model without goldens: one request of seeded random data, said so (it was an error)
    other = tmp_path / "other"
    other.mkdir()
    for name in ("model.py", "doubler.yaml"):
        (other / name).write_text((tmp_path / name).read_text())
    assert cli("build", other / "doubler.yaml", "-o", other / "OUT").exit_code == 0
    r = cli("infer", other / "OUT", "doubler", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["inputs"] == "random" and len(doc["samples"][0]["outputs"]["Y"]["data"][0]) == 3
    r = cli("infer", other / "OUT", "doubler", "--data", "zeros", "--json")
    assert json.loads(r.stdout)["samples"][0]["outputs"]["Y"]["data"] == [[1.0, 1.0, 1.0]]


def _serve_argv(repo, port: int, *extra: str) -> list[str]:
    """`tritonbuild serve REPO` as a user runs it, HTTP on `port`, gRPC and metrics on free ports."""
    return [sys.executable, "-m", "tritonbuild", "serve", str(repo), *extra,
            "--http-port", str(port), "--grpc-port", "0", "--metrics-port", "0"]  # fmt: skip


def test_serve_on_a_taken_port_fails_before_claiming_ready(cli, py_recipe, tmp_path):
    """Another tritonserver on the port: serve printed 'tritonserver ready ... loaded: doubler' (the other server
    answered the health probe and the loads), then failed, and --json printed two documents."""
    from tritonbuild.server.embedded import EmbeddedServer

    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    with EmbeddedServer(out) as other:
        port = other.http_port
        for extra in ([], ["--json"]):
            res = subprocess.run(
                _serve_argv(out, port, *extra), capture_output=True, text=True, timeout=120
            )
            assert res.returncode == 8, res.stderr  # ServerError
            assert " ready " not in res.stdout and "loaded:" not in res.stdout
            if extra:
                doc = json.loads(res.stdout)  # one document: the error
                assert "loaded" not in doc and doc["error"] == "server"
                assert f"port {port}" in doc["message"] and "--http-port 0" in doc["hint"]
            else:
                assert (
                    f"port {port} on 127.0.0.1 is already in use" in res.stderr
                    and "--http-port 0" in res.stderr
                )


def test_a_picked_port_taken_before_the_server_binds_it_is_picked_again(tmp_path, monkeypatch):
    """.ci/run at c1bd206: 'tritonserver exited with code 1 while starting' after it had loaded its models and
    listened on HTTP and gRPC: its metrics port, free when picked, was taken before the server bound it. The start
    now picks again; a port the caller gave is never replaced (the test above)."""
    import socket

    from tritonbuild.server import embedded

    picks = []

    def first_pick_taken(count, avoid=frozenset()):
        got = free_ports(count, avoid)
        picks.append(got)
        return [busy.getsockname()[1], *got[1:]] if len(picks) == 1 else got

    (tmp_path / "repo").mkdir()
    monkeypatch.setattr(embedded, "free_ports", first_pick_taken)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", free_port()))
        busy.listen()
        with embedded.EmbeddedServer(tmp_path / "repo", log_path=tmp_path / "server.log") as server:
            assert len(picks) == 2 and server.http_port == picks[1][0] != busy.getsockname()[1]
            assert server.version  # live: GET /v2 answered
        assert (
            "failed to start" not in (tmp_path / "server.log").read_text()
        )  # the log is the last start's


def test_serve_failure_names_the_kept_log(cli, py_recipe, tmp_path):
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    (out / "doubler" / "config.pbtxt").write_text(
        "not a config"
    )  # the server starts, the load fails
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "tritonbuild",
            "serve",
            str(out),
            "--http-port",
            "0",
            "--grpc-port",
            "0",
            "--metrics-port",
            "0",
            "--log-file",
            str(tmp_path / "s.log"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 8, res.stderr  # ServerError
    # the model's load failed as the server started: named with Triton's own message for it
    assert (
        "tritonserver failed to load 'doubler': failed to load 'doubler', failed to poll from model repository"
        in res.stderr
    ), res.stderr
    assert f"see the server log {tmp_path / 's.log'}" in res.stderr
    assert (tmp_path / "s.log").is_file() and (tmp_path / "s.log").stat().st_size > 0


def _stop(proc: subprocess.Popen) -> None:
    try:
        assert stop_serve(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def _snapshot(root) -> dict[str, int | None]:
    """Every path under root, with each file's mtime (a directory's changes when the Python stub's __pycache__/
    is made and removed: the stub's interpreter ignores PYTHONDONTWRITEBYTECODE)."""
    return {
        p.relative_to(root).as_posix(): p.stat().st_mtime_ns if p.is_file() else None
        for p in root.rglob("*")
    }


def test_a_hand_written_repository_is_served_and_inferred_and_left_untouched(cli, tmp_path):
    """No tritonbuild manifest: serve DIR refused it, serve file://DIR loaded nothing in explicit mode, infer DIR
    needed goldens; now they serve what Triton would load, infer sends generated data, and nothing is written."""
    from tests.contracts import repositories

    repo = tmp_path / "models"
    repo.mkdir()
    repositories.write_batch_auto_complete(repo)  # no config.pbtxt
    adder = repositories.write_batch_auto_complete(tmp_path / "spare")
    adder.rename(repo / "adder")
    (repo / "adder" / "config.pbtxt").write_text('backend: "python"\nmax_batch_size: 4\n')
    ort = repo / "ort"
    (ort / "1").mkdir(parents=True)
    (ort / "config.pbtxt").write_text('platform: "onnxruntime_onnx"\nmax_batch_size: 0\n')
    (ort / "1" / "model.onnx").write_bytes(b"placeholder")
    before = _snapshot(repo)

    r = cli("infer", repo, "batch_auto_complete", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["inputs"] == "random" and set(doc["samples"][0]["outputs"]) == {"OUTPUT0", "OUTPUT1"}
    r = cli("infer", repo, "adder", "--data", "zeros", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["samples"][0]["outputs"]["OUTPUT0"]["data"] == [[0.0] * 4]
    r = cli("infer", repo, "ort")
    assert r.exit_code == 9 and "the embedded tritonserver cannot load 'ort'" in r.stderr, r.stderr
    r = cli("infer", "localhost:8000", "adder")
    assert r.exit_code == 2 and "tritonbuild infer http://localhost:8000 adder" in r.stderr

    proc, info = serve_json(repo)
    try:
        assert info["loaded"] == ["adder", "batch_auto_complete"] and info["not_loaded"] == ["ort"]
        r = cli("infer", info["http"], "adder", "--json")
        assert r.exit_code == 0 and json.loads(r.stdout)["inputs"] == "random", r.stderr
        metrics = info["metrics"]
        r = cli("status", info["http"], "--metrics-url", metrics, "--json")
        assert r.exit_code == 0, r.stderr
        status = json.loads(r.stdout)
        assert status["live"] and status["ready"] and status["version"] and status["notes"] == []
        rows = {row["name"]: row for row in status["models"]}
        assert rows["adder"]["state"] == "READY" and rows["adder"]["config"]["max_batch_size"] == 4
        assert rows["adder"]["config"]["inputs"] == ["INPUT0 FP32 [4]", "INPUT1 FP32 [4]"]
        assert rows["adder"]["metrics"]["nv_inference_request_success"] >= 1
        assert rows["ort"]["state"] == "not loaded"
        assert "adder" in cli("status", info["http"], "--metrics-url", metrics).stdout
    finally:
        _stop(proc)
    proc, info = serve_json(f"file://{repo}")
    try:
        assert info["loaded"] == ["adder"] and info["not_loaded"] == [
            "ort"
        ]  # a config-less model is not listed
        assert cli("infer", info["http"], "adder").exit_code == 0
    finally:
        _stop(proc)
    assert _snapshot(repo) == before  # no __pycache__, no report, nothing


def test_infer_a_wrong_model_or_input_name_lists_what_the_server_has(cli, py_recipe, tmp_path):
    """issue 31.4 (5): a wrong model or input name against a running server said only Triton's refusal, not the
    names the server has."""
    out = _built(cli, py_recipe, tmp_path)
    proc, info = serve_json(str(out))
    try:
        r = cli("infer", info["http"], "dobler")
        assert r.exit_code == 9 and "the server's models: doubler (READY, version 1)" in r.stderr, (
            r.stderr
        )
        r = cli("infer", info["http"], "dobler", "--json")
        assert r.exit_code == 9 and "doubler (READY, version 1)" in json.loads(r.stdout)["hint"], (
            r.stdout
        )
        np.save(tmp_path / "x.npy", np.array([[1, 2, 3]], np.float32))
        r = cli("infer", info["http"], "doubler", "--input", f"Z={tmp_path / 'x.npy'}")
        assert (
            r.exit_code == 9
            and "'Z'" in r.stderr
            and "doubler's inputs: X (FP32 [-1, 3])" in r.stderr
        ), r.stderr
        assert stop_serve(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


SLOW_CONFIG = """name: "slow"
backend: "python"
max_batch_size: 0
input [ { name: "X", data_type: TYPE_FP32, dims: [ 2 ] } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: [ 2 ] } ]
instance_group [ { kind: KIND_CPU, count: 1 } ]
"""
SLOW_MODEL = """import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(4)  # a model that takes its time to load

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]
            )
            for r in requests
        ]
"""


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:  # refused, not yet listening, or 400 (urllib's HTTPError is an OSError)
        return False


def test_serve_is_not_ready_before_its_models_are(tmp_path):
    """Under explicit model control, tritonserver's /v2/health/ready never answers 200 while serve's
    models are still loading: the models load as the server starts (Triton's --load-model), so a
    probe or a script that waits on the server's readiness never reaches a model that is LOADING.
    Before, serve started an empty server (ready) and asked it to load the models afterwards."""
    repo = tmp_path / "repo"
    (repo / "slow" / "1").mkdir(parents=True)
    (repo / "slow" / "config.pbtxt").write_text(SLOW_CONFIG)
    (repo / "slow" / "1" / "model.py").write_text(SLOW_MODEL)
    # outside the ephemeral range: no client socket takes it before serve binds it
    port = free_port()
    proc = subprocess.Popen(
        _serve_argv(repo, port, "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + limit(30)  # serve and the model's 4 s load: 9 s (2026-12-06)
        while not _answers(f"http://127.0.0.1:{port}/v2/health/ready"):
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the server never became ready"
            time.sleep(0.05)
        assert _answers(f"http://127.0.0.1:{port}/v2/models/slow/ready")
    finally:
        stop_serve(proc)
