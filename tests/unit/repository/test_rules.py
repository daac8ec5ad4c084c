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


@pytest.mark.parametrize(
    "config, versions, name, files, check, words",
    [
        (
            GOOD + "max_batch_szie: 2\n",
            ("1",),
            "m",
            ("model.py",),
            "config.parse",
            "max_batch_szie",
        ),
        (GOOD, ("1",), "other", ("model.py",), "name", "directory name must equal model name"),
        (GOOD, ("01",), "m", ("model.py",), "versions", "not a plain number"),
        (GOOD, (), "m", ("model.py",), "versions", "no numeric version"),
        (
            GOOD + "version_policy { specific { versions: [2] } }\n",
            ("1",),
            "m",
            ("model.py",),
            "versions",
            "not present",
        ),
        (GOOD, ("1",), "m", ("other.py",), "model_file", "1/model.py is missing"),
        (
            GOOD.replace('backend: "python"', 'backend: "onnxruntime" platform: "tensorrt_plan"'),
            ("1",),
            "m",
            ("model.onnx",),
            "triton-rules",
            "unexpected 'platform' and 'backend' pair, got:tensorrt_plan, onnxruntime",
        ),
        (
            GOOD + "dynamic_batching { preferred_batch_size: [8] }\n",
            ("1",),
            "m",
            ("model.py",),
            "triton-rules",
            "dynamic batching preferred size must be <= max batch size for m",
        ),
        (
            GOOD.replace("dims: [3] }\noutput", "dims: [0] }\noutput"),
            ("1",),
            "m",
            ("model.py",),
            "triton-rules",
            "model input 'X' dimension must be integer >= 1, or -1",
        ),
        (
            GOOD.replace("KIND_CPU count: 1", "KIND_CPU count: 1 gpus: [0]"),
            ("1",),
            "m",
            ("model.py",),
            "triton-rules",
            "has kind KIND_CPU but specifies one or more GPUs",
        ),
        (
            GOOD + "model_metrics { metric_control { metric_identifier { family: 'f' } } }\n",
            ("1",),
            "m",
            ("model.py",),
            "triton-rules",
            "model_metrics is not a field of tritonserver 2.51.0's ModelConfig",
        ),
    ],
)
def test_rule_violations(tmp_path, config, versions, name, files, check, words):
    failed = _failed(_model(tmp_path, config, versions, name, files))
    assert check in failed and words in failed[check], failed


@pytest.mark.parametrize(
    "config",
    [
        GOOD.replace("KIND_CPU count: 1", "KIND_CPU"),  # Triton defaults count to 1
        GOOD.replace("max_batch_size: 4", "max_batch_size: 0").replace("[3]", "[-1, 3]")
        + "dynamic_batching { }\n",
        GOOD
        + "dynamic_batching { preserve_ordering: true default_queue_policy { timeout_action: DELAY } }\n",
    ],
)
def test_no_rule_stricter_than_triton(tmp_path, config):
    """Each was refused by an earlier rule; tritonserver 2.51 loads it (tests/fixtures/triton_corpus/accepted.yaml
    holds the same cases, confirmed live)."""
    assert _failed(_model(tmp_path, config)) == {}


def test_preserve_ordering_with_delay_timeout(tmp_path):
    failed = _failed(
        _model(
            tmp_path,
            GOOD + "dynamic_batching { preserve_ordering: true default_queue_policy { "
            "timeout_action: DELAY default_timeout_microseconds: 1000 } }\n",
        )
    )
    assert (
        "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true"
        in failed["triton-rules"]
    )


def test_ensemble_cycle_is_a_finding_not_a_crash(tmp_path):
    for a, b in (("a", "b"), ("b", "a")):
        d = tmp_path / a
        (d / "1").mkdir(parents=True)
        (d / "config.pbtxt").write_text(
            f'name: "{a}" platform: "ensemble" max_batch_size: 4\n'
            'input { name: "X" data_type: TYPE_FP32 dims: [3] }\noutput { name: "Y" data_type: TYPE_FP32 dims: [3] }\n'
            f'ensemble_scheduling {{ step {{ model_name: "{b}" model_version: -1 input_map {{ key: "X" value: "X" }} '
            'output_map { key: "Y" value: "Y" } } }\n'
        )
    failed = _failed(tmp_path / "a")
    assert "circular dependency between ensembles: a -> ... -> b -> a" in failed["model_file"]


def test_name_mismatch_is_reported_once(tmp_path):
    """It was reported twice: as the "name" row and again inside "triton-rules"."""
    findings = [f for f in check_model_dir(_model(tmp_path, GOOD, name="other")) if not f.ok]
    assert [f.check for f in findings] == ["name"], findings
    assert findings[0].detail == (
        "unexpected directory name 'other' for model 'm', directory name must equal model name"
    )


def test_backend_offline_checks_run_once(tmp_path):
    """vLLM's own load checks were added twice (once through for_manifest, once through for_triton)."""
    config = GOOD.replace('backend: "python"', 'backend: "vllm"')
    checks = [f.check for f in check_model_dir(_model(tmp_path, config, files=("model.json",)))]
    assert checks.count("vllm") == 1, checks
