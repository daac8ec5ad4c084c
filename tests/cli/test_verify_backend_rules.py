"""`tritonbuild verify` runs a registered backend's own model-file checks (#10): a backend registered only in
this test (tests/plugins/toyrt.py) gets its rows, beside Triton's core checking the same config."""

from __future__ import annotations

import json

import pytest

from tests.plugins.toyrt import ToyBackend, write_model
from tritonbuild.backends import REGISTRY


@pytest.mark.triton
def test_verify_runs_a_registered_backends_model_file_checks(cli, tmp_path):
    root = tmp_path / "repo"
    write_model(root, "toyish", 'backend: "toyrt"', {"model.toy": b"not a toy"})
    with REGISTRY.registered(ToyBackend()):
        r = cli("verify", root, "--json")
    assert r.exit_code == 6, r.stdout
    rows = {c["check"]: c for c in json.loads(r.stdout)["static"] if c["model"] == "toyish"}
    assert not rows["toy.header"]["ok"] and rows["toy.header"]["detail"] == "1/model.toy does not start with b'TOY'"
    assert rows["toy.graph"]["ok"] and rows["model_file"]["ok"]
    (root / "toyish" / "1" / "model.toy").write_bytes(b"TOY v1")
    with REGISTRY.registered(ToyBackend()):
        r = cli("verify", root, "--json")
    rows = {c["check"]: c for c in json.loads(r.stdout)["static"] if c["model"] == "toyish"}
    assert rows["toy.header"]["ok"] and r.exit_code == 0, r.stdout
    without = {c["check"] for c in json.loads(cli("verify", root, "--json").stdout)["static"]}
    assert "toy.header" not in without  # registered only in this test
