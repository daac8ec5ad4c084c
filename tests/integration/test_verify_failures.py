"""Ordinary model bugs and Triton refusals are FAIL rows with Triton's words, exit 6, the report written."""

from __future__ import annotations

import json

import pytest

from tests.conftest import PY_MODEL

pytestmark = pytest.mark.triton


@pytest.mark.parametrize(
    "model_py, words",
    [
        (PY_MODEL.replace("out = []", "raise RuntimeError('boom in execute')"), "boom in execute"),
        (PY_MODEL.replace('pb_utils.Tensor("Y"', 'pb_utils.Tensor("Z"'), "no output ['Y']"),
    ],
)
def test_model_bug_is_a_fail_row(cli, py_recipe, tmp_path, write, model_py, words):
    write("model.py", model_py)
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    r = cli("verify", out, "--json", "--record")
    assert r.exit_code == 6, r.stdout + r.stderr
    (m,) = json.loads(r.stdout)["models"]
    assert m["loaded"] is True and m["passed"] is False and words in m["infer_error"], m
    assert json.loads((out / "tritonbuild-verification.json").read_text())["passed"] is False
    r = cli("verify", out, "--record")
    assert r.exit_code == 6 and "inference failed" in r.stdout and words in r.stdout


def test_poll_refusal_shows_the_cause_from_the_server_log(cli, py_recipe, tmp_path):
    """A config Triton refuses when polling: the load API says only 'failed to poll'; the row says why."""
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    cfg = out / "doubler" / "config.pbtxt"
    from tritonbuild.repository.manifest import read_manifest
    from tritonbuild.verify import run

    cfg.write_text(
        cfg.read_text() + "dynamic_batching { preserve_ordering: true default_queue_policy { "
        "timeout_action: DELAY default_timeout_microseconds: 1000 } }\n"
    )
    from tritonbuild.server.embedded import EmbeddedServer

    with EmbeddedServer(out) as server:
        errors = run._load_all(server, [read_manifest(out).model("doubler")])
    assert (
        "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true"
        in errors["doubler"]
    )
    assert "failed to poll" not in errors["doubler"]


def test_verify_server_refuses_a_server_serving_another_build(cli, py_recipe, tmp_path, write):
    """A shared staging server holding another build of the same model (its input renamed) is not this OUT."""
    from tritonbuild.server.embedded import EmbeddedServer

    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    assert cli("verify", out, "--record").exit_code == 0
    write("model.py", PY_MODEL.replace('"X"', '"A"'))
    write("doubler.yaml", (tmp_path / "doubler.yaml").read_text().replace("name: X", "name: A"))
    other = tmp_path / "OTHER"
    assert cli("build", tmp_path / "doubler.yaml", "-o", other).exit_code == 0
    with EmbeddedServer(other) as server:
        r = cli("verify", out, "--server", f"http://{server.http_url}", "--json")
        assert r.exit_code == 6, r.stdout
        (m,) = json.loads(r.stdout)["models"]
        assert (
            "does not serve this build of 'doubler'" in m["load_error"]
            and "inputs: served [('A'" in m["load_error"]
        ), m
        # what the server says it loaded: another config (its digest is not ours), version 1 ready
        served = m["served"]
        assert served["name"] == "doubler" and served["ready_versions"] == [1]
        assert served["config_sha256"] != served["ours_config_sha256"] and served[
            "server"
        ].startswith("triton ")
    with EmbeddedServer(out) as server:
        r = cli("verify", out, "--server", f"http://{server.http_url}", "--json")
        assert r.exit_code == 0, r.stdout
        (m,) = json.loads(r.stdout)["models"]
        assert m["served"]["config_sha256"] == m["served"]["ours_config_sha256"], m["served"]
        assert m["served"]["server"] == f"triton {server.describe().split()[1]}"
        text = cli("verify", out, "--server", f"http://{server.http_url}").stdout
        assert (
            f"doubler: served by {m['served']['server']}: versions [1] ready, config " in text
            and "= ours" in text
        )
