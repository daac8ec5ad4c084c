"""A backend added by one module (tests/plugins/affine.py), one contract subclass and one registration builds,
verifies live in the embedded tritonserver, and publishes, end to end through the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.plugins.affine import AffineBackend, write_recipe
from tritonbuild.backends import REGISTRY

pytestmark = [pytest.mark.triton, pytest.mark.slow]


@pytest.fixture
def affine():
    with REGISTRY.registered(AffineBackend()) as backend:
        yield backend


def test_a_plugin_backend_builds_verifies_and_publishes(cli, tmp_path, affine):
    recipe = write_recipe(tmp_path, scale=3.0, bias=-1.0)
    out = tmp_path / "OUT"
    r = cli("build", recipe, "-o", out)
    assert r.exit_code == 0, r.stderr
    assert "SCALE = np.float32(3.0)" in (out / "affine-demo" / "1" / "model.py").read_text()

    r = cli("verify", out, "--record", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    (model,) = json.loads(r.stdout)["models"]
    assert (model["path"], model["loaded"], model["passed"]) == ("live-embedded", True, True)
    golden = np.load(tmp_path / "goldens" / "affine-demo.npz")
    inputs = sorted(k for k in golden.files if k.startswith("input."))
    assert len(inputs) == 3
    for key in inputs:  # the live server computed x * 3 - 1
        got = golden[key.replace("input.", "output.").replace(".X", ".Y")]
        np.testing.assert_array_equal(
            got, (golden[key] * np.float32(3.0) + np.float32(-1.0)).astype(np.float32)
        )

    r = cli("build", recipe, "-o", out)  # the recorded goldens travel into the repository
    assert r.exit_code == 0, r.stderr
    r = cli("verify", out)
    assert r.exit_code == 0, r.stdout + r.stderr

    target = f"file://{tmp_path / 'published'}"
    r = cli("publish", out, target, "--json")
    assert r.exit_code == 0, r.stderr
    info = json.loads(cli("ls", target, "--json").stdout)["models"]
    assert [(m["name"], m["live"]) for m in info] == [("affine-demo", 1)]
    assert cli("verify", target).exit_code == 0


def test_without_its_registration_the_recipe_is_a_clear_recipe_error(cli, tmp_path):
    r = cli("validate", write_recipe(tmp_path))
    assert (
        r.exit_code == 3
        and "unknown backend 'affine'" in r.stderr
        and "use one of python" in r.stderr
    )
