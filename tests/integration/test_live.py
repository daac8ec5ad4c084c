"""Live behaviour in the embedded tritonserver: record, mismatch, load errors, --server, serve."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request

import pytest

from tests.conftest import PY_MODEL
from tests.serving import serve_json, stop_serve

pytestmark = [pytest.mark.triton, pytest.mark.slow]


def test_record_then_verify_then_detect_a_changed_model(cli, py_recipe, tmp_path, write):
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    r = cli("verify", out)
    assert r.exit_code == 6 and "no goldens recorded" in r.stdout

    r = cli("verify", out, "--record")
    assert r.exit_code == 0, r.stdout + r.stderr
    golden = tmp_path / "goldens" / "doubler.npz"
    assert golden.is_file() and (tmp_path / "goldens" / "doubler.npz.sha256").is_file()
    assert (out / "doubler" / "golden-v1.npz").read_bytes() == golden.read_bytes()

    assert cli("build", py_recipe, "-o", out).exit_code == 0
    r = cli("verify", out, "--json")
    assert r.exit_code == 0
    (m,) = json.loads(r.stdout)["models"]
    assert m["passed"] and m["compared"] == 3 * 2 and m["batch_invariance"] == "invariant"

    write("model.py", PY_MODEL.replace("x * 2 + 1", "x * 2 + 1.0000001"))
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    r = cli("verify", out, "--json")
    assert r.exit_code == 6
    (m,) = json.loads(r.stdout)["models"]
    mm = m["mismatches"][0]
    assert mm["output"] == "Y" and mm["differing"] >= 1 and mm["max_abs_diff"] > 0
    assert mm["first_index"] is not None and m["passed"] is False
    # the changed model differs from its goldens, alone and batched alike: it is still batch-invariant (its
    # batched answers equal its own unbatched ones), and only the repeats' comparisons are mismatches
    assert m["batch_invariance"] == "invariant", m["batch_detail"]
    assert {x["context"].split()[0] for x in m["mismatches"]} == {"repeat"}
    r = cli("verify", out)
    assert "batching=invariant" in r.stdout or " invariant " in r.stdout, r.stdout


def test_syntax_error_reported_from_triton(cli, py_recipe, tmp_path, write):
    """A model.py that fails only when the stub imports it (the build compiles it: syntax errors stop there)."""
    write("model.py", "raise ImportError('no module named weights_loader')\n")
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    r = cli("verify", out, "--json")
    assert r.exit_code == 6
    (m,) = json.loads(r.stdout)["models"]
    assert m["loaded"] is False and "weights_loader" in m["load_error"]
    assert "failed to load 'doubler'" in m["load_error"]


def test_verify_against_a_given_server(cli, py_recipe, tmp_path):
    from tritonbuild.server.embedded import EmbeddedServer

    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    assert cli("verify", out, "--record").exit_code == 0
    with EmbeddedServer(out) as server:
        r = cli("verify", out, "--server", f"http://{server.http_url}", "--json")
    assert r.exit_code == 0, r.stdout
    (m,) = json.loads(r.stdout)["models"]
    assert m["path"] == "live-server" and m["passed"]


def _tritonservers_for(path) -> list[str]:
    ps = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if "tritonserver" in line and str(path) in line]


def test_serve_prints_addresses_answers_and_stops_on_ctrl_c(cli, py_recipe, tmp_path):
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    proc, info = serve_json(str(out))
    try:
        assert info["loaded"] == ["doubler"]
        body = json.dumps(
            {"inputs": [{"name": "X", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]}
        )
        req = urllib.request.Request(
            f"{info['http']}/v2/models/doubler/infer", data=body.encode(), method="POST"
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert json.loads(resp.read())["outputs"][0]["data"] == [3.0, 5.0, 7.0]
        assert _tritonservers_for(out)
        assert stop_serve(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    time.sleep(0.5)
    assert _tritonservers_for(out) == [], "tritonserver outlived 'tritonbuild serve'"


COUNTER = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.calls = 0

    def execute(self, requests):
        self.calls += 1
        return [pb_utils.InferenceResponse([pb_utils.Tensor("COUNT", np.full((1, 1), self.calls, np.int64))])
                for _ in requests]
"""


@pytest.mark.parametrize(
    "warmup, first_count",
    [("", 1), ("warmup: {data: zero, count: 2}\n", 3), ("warmup: {data: random, count: 1}\n", 2)],
)
def test_warmup_runs_before_the_model_is_ready(cli, write, tmp_path, warmup, first_count):
    from tritonbuild.server.embedded import EmbeddedServer

    write("model.py", COUNTER)
    p = write(
        "counter.yaml",
        "name: counter\nversion: 1\nbackend: python\nsource: {path: model.py}\n"
        "max_batch_size: 4\ninputs: [{name: X, dtype: fp32, dims: [-1]}]\n"
        "outputs: [{name: COUNT, dtype: int64, dims: [1]}]\n" + warmup,
    )
    out = tmp_path / "OUT"
    assert cli("build", p, "-o", out).exit_code == 0
    with EmbeddedServer(out) as server:
        server.load("counter")
        body = json.dumps(
            {"inputs": [{"name": "X", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}]}
        )
        req = urllib.request.Request(
            f"http://{server.http_url}/v2/models/counter/infer", data=body.encode(), method="POST"
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert json.loads(resp.read())["outputs"][0]["data"] == [first_count]
