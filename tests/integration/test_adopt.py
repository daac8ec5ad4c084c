"""tritonbuild adopt: python_backend's add_sub-style hand-written repository becomes recipes that build the same
config, with goldens recorded from the model; then build → verify (bit for bit) → publish → a new version →
rollback, as for a repository we built."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.contracts import repositories
from tritonbuild.triton.config import parse

pytestmark = pytest.mark.triton

SAME = ("backend", "max_batch_size", "input", "output", "instance_group")


def test_adopt_build_verify_publish_rollback(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    repo = tmp_path / "models"
    repo.mkdir()
    original = parse((repositories.write_add_sub(repo) / "config.pbtxt").read_bytes())
    r = cli("adopt", repo, "-o", tmp_path / "recipes", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["goldens"] == {"add_sub": True}
    recipe = tmp_path / "recipes" / "add_sub.yaml"
    assert (tmp_path / "recipes" / "goldens" / "add_sub.npz").is_file()

    out = tmp_path / "OUT"
    assert cli("build", tmp_path / "recipes", "-o", out).exit_code == 0
    built = parse((out / "add_sub" / "config.pbtxt").read_bytes())
    for field in SAME:  # the same config semantics (a KIND_CPU group of one instance is count 1 either way)
        got, want = getattr(built, field), getattr(original, field)
        if field == "instance_group":
            got, want = [(g.kind, g.count or 1) for g in got], [(g.kind, g.count or 1) for g in want]
        assert got == want, field
    r = cli("verify", out, "--json")
    assert r.exit_code == 0, r.stdout
    (model,) = json.loads(r.stdout)["models"]
    assert model["passed"] and model["compared"] > 0 and not model["mismatches"]

    target = f"file://{tmp_path / 'pub'}"
    assert cli("publish", out, target).exit_code == 0
    spec = yaml.safe_load(recipe.read_text())
    recipe.write_text(yaml.safe_dump({**spec, "version": 2}, sort_keys=False))
    assert cli("build", tmp_path / "recipes", "-o", out).exit_code == 0
    assert cli("verify", out).exit_code == 0  # the goldens adopt recorded hold for version 2
    assert cli("publish", out, target).exit_code == 0
    assert "versions: 2" in (tmp_path / "pub" / "add_sub" / "config.pbtxt").read_text()
    r = cli("rollback", target, "add_sub", "--to", "1")
    assert r.exit_code == 0, r.stderr
    assert "versions: 1" in (tmp_path / "pub" / "add_sub" / "config.pbtxt").read_text()


def test_adopt_names_what_it_cannot_adopt(cli, tmp_path):
    repo = tmp_path / "models"
    repo.mkdir()
    repositories.write_inception_graphdef(repo)
    r = cli("adopt", repo, "-o", tmp_path / "recipes")
    assert r.exit_code == 2 and "backend tensorflow_graphdef is not adopted yet" in r.stderr
    assert "tritonbuild publish DIR URL" in r.stderr
