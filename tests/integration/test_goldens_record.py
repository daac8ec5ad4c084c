"""Recording goldens: where they go is said, committed goldens are not replaced silently, a missing declared
goldens file is reported at build."""

from __future__ import annotations

import json

import pytest

from tests.conftest import PY_MODEL, PY_RECIPE

pytestmark = pytest.mark.triton


def test_build_warns_about_a_missing_declared_goldens_file(cli, py_recipe, tmp_path):
    r = cli("build", py_recipe, "-o", tmp_path / "OUT")
    assert r.exit_code == 0
    assert (
        "verify.goldens goldens/doubler.npz does not exist" in r.stderr and "--record" in r.stderr
    )


def test_record_without_declared_goldens_says_where(cli, write, tmp_path):
    write("model.py", PY_MODEL)
    recipe = write("r.yaml", PY_RECIPE.replace("goldens: goldens/doubler.npz, ", ""))
    out = tmp_path / "OUT"
    assert cli("build", recipe, "-o", out).exit_code == 0
    r = cli("verify", out, "--record", "--json")
    assert r.exit_code == 0, r.stdout
    (m,) = json.loads(r.stdout)["models"]
    assert any(
        f"goldens recorded into {out / 'doubler' / 'golden-v1.npz'} only" in n
        and "set verify.goldens" in n
        for n in m["notes"]
    ), m["notes"]


def test_record_does_not_replace_committed_goldens_without_force(cli, py_recipe, tmp_path, write):
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    assert cli("verify", out, "--record").exit_code == 0
    committed = tmp_path / "goldens" / "doubler.npz"
    before = committed.read_bytes()

    write("model.py", PY_MODEL.replace("x * 2 + 1", "x * 3 + 1"))
    scratch = tmp_path / "SCRATCH"
    assert cli("build", py_recipe, "-o", scratch).exit_code == 0
    r = cli("verify", scratch, "--record", "--json")
    assert r.exit_code == 6
    (m,) = json.loads(r.stdout)["models"]
    assert any("not overwritten" in n and "--force" in n for n in m["notes"]), m["notes"]
    assert committed.read_bytes() == before

    r = cli("verify", scratch, "--record", "--force")
    assert r.exit_code == 0, r.stdout
    assert committed.read_bytes() != before


def test_record_force_after_an_input_rename_records_the_new_inputs(cli, py_recipe, tmp_path, write):
    """--record --force kept the old goldens' inputs (named X) for a model now taking Z, and FAILed with no hint."""
    from tritonbuild.core.npz import read_npz
    from tritonbuild.verify.goldens import from_npz_arrays

    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    assert cli("verify", out, "--record").exit_code == 0
    write("model.py", PY_MODEL.replace('"X"', '"Z"'))
    write("doubler.yaml", PY_RECIPE.replace("{name: X,", "{name: Z,"))
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    r = cli("verify", out, "--record", "--json")
    (m,) = json.loads(r.stdout)["models"]
    assert r.exit_code == 6 and any("--record --force" in n for n in m["notes"]), m["notes"]
    r = cli("verify", out, "--record", "--force", "--json")
    assert r.exit_code == 0, r.stdout
    inputs, _ = from_npz_arrays(read_npz(tmp_path / "goldens" / "doubler.npz"))
    assert {name for sample in inputs for name in sample} == {"Z"}
    assert cli("build", py_recipe, "-o", out).exit_code == 0 and cli("verify", out).exit_code == 0


def test_tolerance_is_reported_as_within_tolerance_never_bit_exact(cli, py_recipe, tmp_path, write):
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    assert cli("verify", out, "--record").exit_code == 0
    write(
        "model.py", PY_MODEL.replace("x * 2 + 1", "x * 2 + 1.0000001")
    )  # one ulp off for some outputs
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    assert cli("verify", out).exit_code == 6  # bit-exact by default
    write(
        "doubler.yaml",
        py_recipe.read_text().replace(
            "batch_invariance: require}",
            "batch_invariance: require,\n         tolerance: {Y: {ulp: 2}}}",
        ),
    )
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    r = cli("verify", out, "--json")
    assert r.exit_code == 0, r.stdout
    (m,) = json.loads(r.stdout)["models"]
    assert m["passed"] and not m["mismatches"] and m["tolerated"]
    assert any("within tolerance" in n and "not bit-exact" in n for n in m["notes"])
    r = cli("verify", out)
    assert "within tolerance" in r.stdout and "yes (" not in r.stdout


def test_verify_rebuild_compares_every_artefact_and_gates_publish(
    cli, py_recipe, tmp_path, write, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "OUT"
    assert cli("build", "doubler.yaml", "-o", out).exit_code == 0
    assert cli("verify", out, "--record").exit_code == 0
    target = f"file://{tmp_path}/pub"
    r = cli("publish", out, target, "--require-reproducible")
    assert r.exit_code == 7 and "has no rebuild check" in r.stderr and "--rebuild" in r.stderr

    r = cli("verify", out, "--rebuild", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)["reproducibility"]
    assert rep["differ"] == [] and rep["identical"] >= 3
    assert cli("publish", out, target, "--require-reproducible").exit_code == 0

    write(
        "model.py", PY_MODEL.replace("x * 2 + 1", "x * 2 + 2")
    )  # a source changed after the build
    r = cli("verify", out, "--rebuild", "--json")
    assert r.exit_code == 6
    rep = json.loads(r.stdout)["reproducibility"]
    assert any(
        d.startswith("doubler/1/model.py: its inputs changed since the build")
        for d in rep["differ"]
    ), rep
    r = cli("verify", out, "--rebuild")
    assert "rebuild:" in r.stdout and "doubler/1/model.py" in r.stdout


def _changed_on_purpose(cli, py_recipe, tmp_path, write):
    """Goldens committed, then the model changed on purpose and rebuilt: OUT's goldens no longer match."""
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    assert cli("verify", out, "--record").exit_code == 0
    write("model.py", PY_MODEL.replace("x * 2 + 1", "x * 3 + 1"))
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    return out


def test_a_golden_mismatch_says_how_to_accept_an_intended_change(cli, py_recipe, tmp_path, write):
    """issue 31.4 (1): a failed verify gave no hint how to accept outputs that changed on purpose."""
    out = _changed_on_purpose(cli, py_recipe, tmp_path, write)
    r = cli("verify", out)
    assert r.exit_code == 6
    assert f"tritonbuild verify {out} --record --force" in r.stderr and "rebuild" in r.stderr, (
        r.stderr
    )
    r = cli("verify", out, "--json")
    assert r.exit_code == 6
    hint = json.loads(r.stdout)["hint"]
    assert f"tritonbuild verify {out} --record --force" in hint and "rebuild" in hint, hint


def test_a_refused_record_row_does_not_say_recorded(cli, py_recipe, tmp_path, write):
    """issue 31.4 (2): verify --record that refused to overwrite committed goldens still said goldens=recorded."""
    out = _changed_on_purpose(cli, py_recipe, tmp_path, write)
    r = cli("verify", out, "--record")
    assert r.exit_code == 6
    (row,) = [line for line in r.stdout.splitlines() if line.startswith("model=doubler ")]
    assert "goldens=refused " in row, row
    r = cli("verify", out, "--record", "--json")
    (model,) = json.loads(r.stdout)["models"]
    assert r.exit_code == 6 and "not overwritten" in model["goldens_refused"], model


def test_a_dtype_contract_violation_is_a_model_error_never_a_golden(
    cli, py_recipe, tmp_path, write
):
    """Issue 43: a model returning float64 for an output declared TYPE_FP32 failed with the generic hint
    '--record --force'; following it recorded float64 goldens and the next verify PASSED. The answers are
    checked against config.pbtxt's declared outputs first: cause 'contract', nothing recorded, --force included."""
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    assert cli("verify", out, "--record").exit_code == 0
    committed = tmp_path / "goldens" / "doubler.npz"
    kept = {path: path.read_bytes() for path in (committed, out / "doubler" / "golden-v1.npz")}

    write("model.py", PY_MODEL.replace(".astype(np.float32)", ".astype(np.float64)"))
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    r = cli("verify", out, "--json")
    assert r.exit_code == 6
    report = json.loads(r.stdout)
    (m,) = report["models"]
    assert m["cause"] == "contract" and not m["passed"], m
    assert any("float64" in v and "TYPE_FP32" in v for v in m["contract_violations"]), m
    assert "--force" not in report["hint"] or "cannot accept" in report["hint"], report["hint"]
    assert "fix the model" in report["hint"]

    r = cli("verify", out, "--record", "--force", "--json")
    assert r.exit_code == 6, r.stdout
    (m,) = json.loads(r.stdout)["models"]
    assert m["cause"] == "contract" and m["goldens_refused"], m
    assert committed.read_bytes() == kept[committed]
    assert (out / "doubler" / "golden-v1.npz").read_bytes() == kept[
        out / "doubler" / "golden-v1.npz"
    ]
    r = cli("verify", out)
    assert r.exit_code == 6 and "break the outputs" in r.stderr + r.stdout
