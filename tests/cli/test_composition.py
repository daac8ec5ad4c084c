"""Ensembles and BLS pipelines: recipe rules, checks against the step models, generated configs."""

from __future__ import annotations

import json

import pytest

from tests.conftest import PY_MODEL, PY_RECIPE
from tritonbuild.triton.config import parse

ENSEMBLE = """
name: twice
version: 1
backend: ensemble
max_batch_size: 4
inputs: [{name: IN, dtype: fp32, dims: [3]}]
outputs: [{name: OUT, dtype: fp32, dims: [3]}]
steps:
  - model: doubler
    inputs: {X: IN}
    outputs: {Y: mid}
  - model: doubler
    inputs: {X: mid}
    outputs: {Y: OUT}
"""


@pytest.fixture
def pipeline(write, py_recipe):
    return write("twice.yaml", ENSEMBLE)


def _build(cli, tmp_path, *recipes):
    return cli("build", *recipes, "-o", tmp_path / "OUT")


def test_ensemble_config(cli, tmp_path, pipeline, py_recipe):
    r = _build(cli, tmp_path, py_recipe, pipeline)
    assert r.exit_code == 0, r.stderr
    mc = parse((tmp_path / "OUT" / "twice" / "config.pbtxt").read_bytes())
    assert mc.platform == "ensemble" and not mc.backend and len(mc.instance_group) == 0
    assert [s.model_version for s in mc.ensemble_scheduling.step] == [-1, -1]
    assert (tmp_path / "OUT" / "twice" / "1").is_dir()
    manifest = json.loads((tmp_path / "OUT" / "tritonbuild-manifest.json").read_text())
    assert {m["name"]: m["depends_on"] for m in manifest["models"]}["twice"] == ["doubler"]


def test_tune_refuses_a_pipeline(cli, tmp_path, pipeline, py_recipe):
    """tune serves one model's own config: the ensemble (whose backend the registry marks as composing the
    models it calls) is refused, exit 2, naming what to tune instead."""
    assert _build(cli, tmp_path, py_recipe, pipeline).exit_code == 0
    r = cli("tune", tmp_path / "OUT", "twice")
    assert r.exit_code == 2 and "'twice' is a ensemble pipeline/LLM model" in r.output, r.output
    assert "tune the models it calls" in r.output and "Traceback" not in r.output


def test_bls_config_carries_its_steps(cli, tmp_path, write, py_recipe):
    p = write("twice.yaml", ENSEMBLE.replace("backend: ensemble", "backend: bls"))
    assert _build(cli, tmp_path, py_recipe, p).exit_code == 0
    mc = parse((tmp_path / "OUT" / "twice" / "config.pbtxt").read_bytes())
    steps = json.loads(mc.parameters["steps"].string_value)
    assert mc.backend == "python" and [s["model"] for s in steps] == ["doubler", "doubler"]
    assert (tmp_path / "OUT" / "twice" / "1" / "model.py").is_file()


@pytest.mark.parametrize(
    "old, new, code, words",
    [
        (
            "inputs: {X: mid}",
            "inputs: {X: nowhere}",
            3,
            "steps[1].inputs.X: step 1 (doubler) reads 'nowhere' but nothing provides it",
        ),
        (
            "inputs: {X: IN}",
            "inputs: {X: mid}",
            3,
            "reads 'mid' but it is written only by step 0, not before (a cycle)",
        ),
        ("outputs: {Y: OUT}", "outputs: {Y: other}", 3, "output 'OUT' is not written by any step"),
        (
            "  - model: doubler\n    inputs: {X: mid}",
            "  - model: twice\n    inputs: {X: mid}",
            3,
            "step 1 calls 'twice' itself: a cycle",
        ),
        (
            "inputs: {X: IN}",
            "inputs: {XX: IN}",
            5,
            "steps[0].inputs.XX: doubler has no input 'XX' (inputs: ['X'])",
        ),
        (
            "outputs: {Y: mid}",
            "outputs: {Z: mid}",
            5,
            "steps[0].outputs.Z: doubler has no output 'Z'",
        ),
        (
            "inputs: [{name: IN, dtype: fp32",
            "inputs: [{name: IN, dtype: int32",
            5,
            "tensor 'IN' is int32 but doubler input 'X' is fp32",
        ),
        ("max_batch_size: 4", "max_batch_size: 8", 5, "max_batch_size 8 exceeds doubler's 4"),
        (
            "model: doubler\n    inputs: {X: IN}",
            "model: ghost\n    inputs: {X: IN}",
            5,
            "steps[0].model: 'ghost' is not built by these recipes",
        ),
    ],
)
def test_bad_pipelines(cli, tmp_path, write, py_recipe, old, new, code, words):
    text = ENSEMBLE.replace(old, new)
    assert text != ENSEMBLE
    p = write("twice.yaml", text)
    r = _build(cli, tmp_path, py_recipe, p)
    assert r.exit_code == code, r.stderr
    assert words in r.stderr
    assert not (tmp_path / "OUT").exists()


def test_cycle_between_two_pipelines(cli, tmp_path, write, py_recipe):
    write(
        "a.yaml",
        ENSEMBLE.replace("name: twice", "name: a").replace(
            "  - model: doubler\n    inputs: {X: mid}", "  - model: b\n    inputs: {X: mid}"
        ),
    )
    write(
        "b.yaml",
        ENSEMBLE.replace("name: twice", "name: b").replace(
            "  - model: doubler\n    inputs: {X: mid}", "  - model: a\n    inputs: {X: mid}"
        ),
    )
    r = cli("build", tmp_path / "a.yaml", tmp_path / "b.yaml", py_recipe, "-o", tmp_path / "OUT")
    assert r.exit_code == 3 and "composition cycle: a → b → a" in r.stderr


def test_warmup_goldens_of_the_wrong_shape(cli, tmp_path, write, py_recipe):
    import numpy as np

    from tritonbuild.core.npz import write_npz

    (tmp_path / "goldens").mkdir()
    write_npz(
        tmp_path / "goldens" / "doubler.npz",
        {"input.0.X": np.zeros((1, 5), np.float32), "output.0.Y": np.zeros((1, 5), np.float32)},
    )
    p = write("doubler.yaml", PY_RECIPE + "warmup: {data: goldens}\n")
    write("model.py", PY_MODEL)
    r = cli("build", p, "-o", tmp_path / "OUT")
    assert r.exit_code == 5 and "golden input 'X' has shape [5], the config says [3]" in r.stderr
