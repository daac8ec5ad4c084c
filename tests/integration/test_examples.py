"""The bundled examples: reproducible builds equal to model_repository/, and live verification."""

from __future__ import annotations

import filecmp
import json
import shutil

import pytest

from tests.conftest import ROOT


def _tree(path):
    return {
        p.relative_to(path).as_posix(): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """recipes/examples built twice, with separate caches (so the ONNX export really runs twice)."""
    from click.testing import CliRunner

    from tritonbuild.cli import main

    base = tmp_path_factory.mktemp("examples")
    mp = pytest.MonkeyPatch()
    mp.chdir(ROOT)
    outs = []
    for i in range(2):
        mp.setenv("TRITONBUILD_CACHE_DIR", str(base / f"cache{i}"))
        out = base / f"A{i}"
        r = CliRunner().invoke(
            main, ["build", "recipes/examples", "-o", str(out)], catch_exceptions=False
        )
        assert r.exit_code == 0, r.stderr
        outs.append(out)
    mp.undo()
    return outs


@pytest.mark.slow
def test_two_builds_are_identical_and_equal_model_repository(built):
    a, b = built
    assert _tree(a) == _tree(b)
    committed = {
        k: v
        for k, v in _tree(ROOT / "model_repository").items()
        if k != "tritonbuild-verification.json"
    }
    assert _tree(a) == committed, "model_repository/ is stale: rebuild it (see README)"


@pytest.mark.slow
def test_every_config_parses_as_model_config(built):
    from tritonbuild.triton.config import parse

    configs = list(built[0].glob("*/config.pbtxt"))
    assert sorted(c.parent.name for c in configs) == [
        "feature-normalizer",
        "image-embedder",
        "risk-pipeline",
        "risk-pipeline-bls",
        "risk-scorer",
        "text-encoder",
    ]
    for c in configs:
        assert parse(c.read_bytes()).name == c.parent.name


@pytest.mark.slow
@pytest.mark.triton
def test_examples_verify_live_and_in_process(built, cli, tmp_path):
    repo = tmp_path / "copied"
    shutil.copytree(built[0], repo)  # verification needs nothing but the repository
    r = cli("verify", repo, "--json")
    assert r.exit_code == 0, r.stdout
    report = json.loads(r.stdout)
    by_name = {m["name"]: m for m in report["models"]}
    scorer, enc = by_name["risk-scorer"], by_name["text-encoder"]
    assert scorer["path"] == "live-embedded" and scorer["loaded"] and scorer["passed"]
    assert scorer["compared"] == 6 * 2 * 3 and scorer["batch_invariance"] == "invariant"
    assert enc["path"] == "in-process" and enc["passed"] and "onnxruntime" in enc["path_detail"]
    for pipeline in ("risk-pipeline", "risk-pipeline-bls"):  # ensemble and BLS, live, bit-exact
        p = by_name[pipeline]
        assert p["path"] == "live-embedded" and p["passed"] and p["batch_invariance"] == "invariant"
    assert by_name["feature-normalizer"]["passed"]  # loaded with its warmup
    assert report["passed"] and report["manifest_digest"]
    saved = json.loads((repo / "tritonbuild-verification.json").read_text())
    assert saved == report
    assert filecmp.cmp(
        repo / "tritonbuild-manifest.json", built[0] / "tritonbuild-manifest.json", shallow=False
    )
