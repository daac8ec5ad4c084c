"""A tampered repository fails verify (exit 6) with the reason; it never crashes it (exit 1)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.cli.test_publish import repo  # noqa: F401 - the fixture
from tritonbuild.core.npz import write_npz
from tritonbuild.repository.assemble import write_manifest
from tritonbuild.repository.manifest import read_manifest


def _rewrite_manifest(out, **model_fields) -> None:
    """What someone with write access does: edit, then recompute every file digest in the manifest."""
    m = read_manifest(out)
    write_manifest(out, m.toolchain, [x.model_copy(update=model_fields) for x in m.models])


def _binding(doc: dict) -> str:
    return " ".join(
        c["detail"] for c in doc["static"] if c["check"] == "manifest-binding" and not c["ok"]
    )


def test_an_edited_model_py_with_a_recomputed_digest_fails_the_model_identity(cli, repo):  # noqa: F811
    out = repo(1)
    (out / "doubler" / "1" / "model.py").write_text("import os  # something else entirely\n")
    _rewrite_manifest(out)
    r = cli("verify", out, "--json")
    assert r.exit_code == 6, r.stdout
    doc = json.loads(r.stdout)
    assert (
        doc["passed"] is False
        and "model identity" in _binding(doc)
        and "doubler/1/" in _binding(doc)
    )


@pytest.mark.parametrize(
    "goldens", ["../../outside.npz", "/etc/passwd", "other/golden-v1.npz", "doubler/1/model.py"]
)
def test_a_goldens_field_that_is_not_the_models_own_file_fails(cli, repo, tmp_path, goldens):  # noqa: F811
    out = repo(1)
    write_npz(tmp_path / "outside.npz", {"input.0.X": np.zeros((1, 3), np.float32)})
    _rewrite_manifest(out, goldens=goldens)
    r = cli("verify", out, "--json")
    assert r.exit_code == 6, r.stdout + r.stderr
    assert "goldens" in _binding(json.loads(r.stdout))


@pytest.mark.triton
@pytest.mark.parametrize("content", ["not-npz", "foreign", "bad-member"])
def test_a_golden_that_is_not_this_models_fails_instead_of_crashing(
    cli, py_recipe, tmp_path, content
):
    out = tmp_path / "out"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    assert cli("verify", out, "--record").exit_code == 0
    golden = out / "doubler" / "golden-v1.npz"
    if content == "not-npz":
        golden.write_bytes(b"PK\x03\x04 this is not an npz")
    elif content == "foreign":
        write_npz(
            golden,
            {
                "input.0.TOKENS": np.zeros((1, 3), np.int64),
                "output.0.Y": np.zeros((1, 3), np.float32),
            },
        )
    else:
        write_npz(golden, {"weights": np.zeros(3, np.float32)})
    _rewrite_manifest(out)
    r = cli("verify", out, "--json")
    assert r.exit_code == 6, r.stdout + r.stderr
    model = json.loads(r.stdout)["models"][0]
    assert model["passed"] is False and "goldens doubler/golden-v1.npz are not usable" in " ".join(
        model["notes"]
    )


@pytest.mark.triton
def test_publish_reverify_catches_a_failed_report_edited_to_passed(cli, py_recipe, tmp_path):
    from tritonbuild.core.hashing import pretty_json
    from tritonbuild.repository.manifest import REPORT_NAME

    assert cli("build", py_recipe, "-o", tmp_path / "v1").exit_code == 0
    assert (
        cli("verify", tmp_path / "v1", "--record").exit_code == 0
    )  # goldens beside the recipe: y = 2x + 1
    model = tmp_path / "model.py"
    model.write_text(model.read_text().replace("x * 2 + 1", "x * 3 + 1"))
    out = tmp_path / "v2"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    assert cli("verify", out).exit_code == 6  # the goldens disagree: FAILED
    doc = json.loads((out / REPORT_NAME).read_text())
    doc["passed"] = (
        True  # no TRITONBUILD_REPORT_KEY here: the forgery is not detectable from the report
    )
    (out / REPORT_NAME).write_bytes(pretty_json(doc))
    r = cli("publish", out, f"file://{tmp_path}/pub", "--reverify")
    assert r.exit_code == 7 and "fails verification now" in r.stderr
    assert not (tmp_path / "pub").exists()
    assert cli("publish", tmp_path / "v1", f"file://{tmp_path}/pub", "--reverify").exit_code == 0
    r = cli("publish", out, f"file://{tmp_path}/pub", "--reverify", "--skip-verify")
    assert r.exit_code == 2


@pytest.mark.triton
def test_answers_of_a_rebuilt_model_name_the_files_that_changed(cli, py_recipe, tmp_path):
    """Goldens keep the digests of the model files they were recorded from: when answers differ, verify says
    whether the model's files did too (another build) and which, instead of only comparing machines."""
    from tritonbuild.core.npz import read_npz
    from tritonbuild.verify.goldens import read_goldens

    assert cli("build", py_recipe, "-o", tmp_path / "v1").exit_code == 0
    assert cli("verify", tmp_path / "v1", "--record").exit_code == 0
    recorded = read_goldens(read_npz(tmp_path / "goldens" / "doubler.npz")).classes[0].files
    manifest = json.loads((tmp_path / "v1" / "tritonbuild-manifest.json").read_text())["files"]
    assert recorded == {
        "config.pbtxt": manifest["doubler/config.pbtxt"]["sha256"],
        "1/model.py": manifest["doubler/1/model.py"]["sha256"],
    }
    model = tmp_path / "model.py"
    model.write_text(model.read_text().replace("x * 2 + 1", "x * 3 + 1"))
    assert cli("build", py_recipe, "-o", tmp_path / "v2").exit_code == 0
    r = cli("verify", tmp_path / "v2", "--json")
    assert r.exit_code == 6, r.stdout + r.stderr
    report = json.loads(r.stdout)["models"][0]
    assert report["cause"] == "model", report
    assert "files differ from those the goldens were recorded from (1/model.py)" in " ".join(
        report["notes"]
    )
