"""`tritonbuild verify` runs a registered backend's own model-file checks: a backend registered only in
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
    assert (
        not rows["toy.header"]["ok"]
        and rows["toy.header"]["detail"] == "1/model.toy does not start with b'TOY'"
    )
    assert rows["toy.graph"]["ok"] and rows["model_file"]["ok"]
    (root / "toyish" / "1" / "model.toy").write_bytes(b"TOY v1")
    with REGISTRY.registered(ToyBackend()):
        r = cli("verify", root, "--json")
    rows = {c["check"]: c for c in json.loads(r.stdout)["static"] if c["model"] == "toyish"}
    assert rows["toy.header"]["ok"] and r.exit_code == 0, r.stdout
    without = {c["check"] for c in json.loads(cli("verify", root, "--json").stdout)["static"]}
    assert "toy.header" not in without  # registered only in this test


@pytest.mark.triton
def test_verify_runs_the_pytorch_backends_load_checks_on_the_torchscript(cli, tmp_path):
    """Triton's core accepts this config; the libtorch backend refuses it at load (one input configured, forward()
    takes two): verify fails the model in the backend's words instead of passing it."""
    torch = pytest.importorskip("torch")

    class TwoInputs(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    d = tmp_path / "repo" / "adder"
    (d / "1").mkdir(parents=True)
    torch.jit.save(torch.jit.script(TwoInputs()), str(d / "1" / "model.pt"))
    io = (
        'input { name: "x__0" data_type: TYPE_FP32 dims: [3] }\n'
        'output { name: "out__0" data_type: TYPE_FP32 dims: [3] }\n'
    )
    (d / "config.pbtxt").write_text(f'name: "adder"\nbackend: "pytorch"\nmax_batch_size: 4\n{io}')
    r = cli("verify", tmp_path / "repo", "--json")
    assert r.exit_code == 6, r.stdout
    rows = {c["check"]: c for c in json.loads(r.stdout)["static"] if c["model"] == "adder"}
    assert rows["libtorch"]["detail"] == (
        "1/model.pt: unable to load model 'adder', configuration expects 1 inputs, model provides 2"
    )
    assert all(row["ok"] for check, row in rows.items() if check != "libtorch"), rows
    io = io + 'input { name: "y__1" data_type: TYPE_FP32 dims: [3] }\n'
    (d / "config.pbtxt").write_text(f'name: "adder"\nbackend: "pytorch"\nmax_batch_size: 4\n{io}')
    r = cli("verify", tmp_path / "repo", "--json")
    rows = {c["check"]: c for c in json.loads(r.stdout)["static"] if c["model"] == "adder"}
    assert rows["libtorch"]["ok"] and r.exit_code == 0, r.stdout


def test_a_pytorch_recipe_with_a_dtype_libtorch_cannot_load_is_a_recipe_error(cli, write, tmp_path):
    write(
        "r.yaml",
        """
        name: halver
        version: 1
        backend: pytorch
        source: {path: model.pt}
        max_batch_size: 8
        inputs: [{name: x__0, dtype: bf16, dims: [4]}]
        outputs: [{name: y__0, dtype: fp32, dims: [4]}]
        """,
    )
    (tmp_path / "model.pt").write_bytes(b"not read: the recipe is refused first")
    r = cli("build", tmp_path / "r.yaml", "-o", tmp_path / "out")
    assert r.exit_code == 3
    assert (
        "r.yaml:6: inputs[0].dtype: dtype bf16" in r.output
        and "TYPE_BF16 and refuses to load" in r.output
    )
    assert not (tmp_path / "out").exists()
