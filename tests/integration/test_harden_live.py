"""Issue #14 against the real tritonserver: 'verify --record' writes goldens only beside the recipe that was
built, and the longest model name we accept (NAME_MAX, 255 bytes) loads and answers."""

from __future__ import annotations

import json

import pytest

from tests.conftest import PY_MODEL, PY_RECIPE

pytestmark = [pytest.mark.triton, pytest.mark.slow]


def test_record_refuses_a_manifest_pointing_goldens_elsewhere(cli, py_recipe, tmp_path):
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    manifest_path = out / "tritonbuild-manifest.json"
    manifest = json.loads(manifest_path.read_text())
    outside = tmp_path.parent / f"{tmp_path.name}-outside.npz"
    manifest["models"][0]["goldens_source"] = str(outside)
    manifest_path.write_text(json.dumps(manifest))
    r = cli("verify", out, "--record")
    assert r.exit_code == 6 and "refusing to write there" in r.stderr, r.stdout + r.stderr
    assert not outside.exists() and not outside.with_name(outside.name + ".sha256").exists()


def test_record_refuses_when_the_recipe_changed_since_the_build(cli, py_recipe, tmp_path):
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    py_recipe.write_text(py_recipe.read_text().replace("repeats: 2", "repeats: 3"))
    r = cli("verify", out, "--record")
    assert r.exit_code == 6 and "changed since the build" in r.stderr, r.stdout + r.stderr
    assert not (tmp_path / "goldens" / "doubler.npz").exists()


def test_a_255_byte_model_name_loads_and_answers_in_tritonserver(cli, write, tmp_path):
    name = "m" * 255
    write("model.py", PY_MODEL)
    recipe = write("long.yaml", PY_RECIPE.replace("name: doubler", f"name: {name}").replace(
        "goldens/doubler.npz", "goldens/long.npz"))
    out = tmp_path / "OUT"
    assert cli("build", recipe, "-o", out).exit_code == 0
    r = cli("verify", out, "--record", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    (m,) = json.loads(r.stdout)["models"]
    assert m["name"] == name and m["loaded"] and m["path"] == "live-embedded", m
