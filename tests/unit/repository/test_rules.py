"""Triton's load rules, offline: each rule has a case that breaks it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonbuild.repository.rules import check_model_dir

GOOD = """name: "m"
backend: "python"
max_batch_size: 4
input { name: "X" data_type: TYPE_FP32 dims: [3] }
output { name: "Y" data_type: TYPE_FP32 dims: [3] }
instance_group { kind: KIND_CPU count: 1 }
"""


def _model(tmp_path: Path, config: str, versions=("1",), name="m", files=("model.py",)) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "config.pbtxt").write_text(config)
    for v in versions:
        (d / v).mkdir()
        for f in files:
            (d / v / f).write_text("")
    return d


def _failed(d: Path) -> dict[str, str]:
    return {f.check: f.detail for f in check_model_dir(d) if not f.ok}


def test_good_model_passes(tmp_path):
    assert _failed(_model(tmp_path, GOOD)) == {}


@pytest.mark.parametrize("config, versions, name, files, check, words", [
    (GOOD + "max_batch_szie: 2\n", ("1",), "m", ("model.py",), "config.parse", "max_batch_szie"),
    (GOOD, ("1",), "other", ("model.py",), "name", "!= directory name"),
    (GOOD, ("01",), "m", ("model.py",), "versions", "not a plain number"),
    (GOOD, (), "m", ("model.py",), "versions", "no numeric version"),
    (GOOD + "version_policy { specific { versions: [2] } }\n", ("1",), "m", ("model.py",), "versions",
     "not present"),
    (GOOD, ("1",), "m", ("other.py",), "model_file", "1/model.py is missing"),
    (GOOD.replace('backend: "python"', 'backend: "onnxruntime" platform: "tensorrt_plan"'), ("1",), "m",
     ("model.onnx",), "model_file", "does not go with"),
    (GOOD + "dynamic_batching { preferred_batch_size: [8] }\n", ("1",), "m", ("model.py",), "batching",
     "preferred_batch_size 8"),
    (GOOD.replace("max_batch_size: 4", "max_batch_size: 0") + "dynamic_batching { }\n", ("1",), "m",
     ("model.py",), "batching", "max_batch_size 0"),
    (GOOD.replace("dims: [3] }\noutput", "dims: [0] }\noutput"), ("1",), "m", ("model.py",), "io", "dims [0]"),
    (GOOD.replace("KIND_CPU count: 1", "KIND_CPU count: 1 gpus: [0]"), ("1",), "m", ("model.py",), "instances",
     "lists gpus"),
])
def test_rule_violations(tmp_path, config, versions, name, files, check, words):
    failed = _failed(_model(tmp_path, config, versions, name, files))
    assert check in failed and words in failed[check], failed
