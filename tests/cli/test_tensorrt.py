from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import EXAMPLES, ROOT
from tritonbuild.triton.config import parse


@pytest.fixture
def trt_dir(tmp_path):
    shutil.copytree(EXAMPLES / "scaler", tmp_path / "scaler")
    shutil.copy(EXAMPLES / "scaler-trt.yaml", tmp_path / "trt.yaml")
    return tmp_path


def test_without_tensorrt_the_plan_step_is_skipped(cli, trt_dir):
    r = cli("build", trt_dir / "trt.yaml", "-o", trt_dir / "OUT", "--json")
    assert r.exit_code == 0
    (step,) = json.loads(r.stdout)["models"][0]["steps"]
    assert step["status"] == "skipped" and "TensorRT is not installed here" in step["reason"]
    assert not (trt_dir / "OUT" / "scaler-trt").exists()
    assert cli("build", trt_dir / "trt.yaml", "-o", trt_dir / "S", "--strict").exit_code == 5


def test_prebuilt_plan_is_assembled_with_profiles_and_io_from_the_graph(cli, trt_dir, tmp_path):
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "model.plan").write_bytes(b"fixture plan bytes\n")
    text = (
        (trt_dir / "trt.yaml")
        .read_text()
        .replace(
            "    - {x: {min: [1, 8], opt: [8, 8], max: [16, 8]}}",
            "    - {x: {min: [1, 8], opt: [8, 8], max: [16, 8]}}\n    - {x: {min: [1, 8], opt: [16, 8], max: [16, 8]}}",
        )
    )
    (trt_dir / "trt.yaml").write_text(text)
    r = cli(
        "build",
        trt_dir / "trt.yaml",
        "-o",
        trt_dir / "OUT",
        "--engine",
        f"scaler-trt={tmp_path / 'plan'}",
    )
    assert r.exit_code == 0, r.stderr
    data = (trt_dir / "OUT" / "scaler-trt" / "config.pbtxt").read_bytes()
    mc = parse(data)
    assert (mc.platform, mc.backend, mc.default_model_filename) == (
        "tensorrt_plan",
        "tensorrt",
        "model.plan",
    )
    assert [(t.name, list(t.dims)) for t in mc.input] == [("x", [8])]
    assert list(mc.instance_group[0].profile) == ["0", "1"]
    assert (
        trt_dir / "OUT" / "scaler-trt" / "1" / "model.plan"
    ).read_bytes() == b"fixture plan bytes\n"


@pytest.mark.parametrize(
    "old, new, words",
    [
        (
            "max: [16, 8]",
            "max: [4, 8]",
            "profile shapes must satisfy min <= opt <= max in every dim",
        ),
        ("min: [1, 8]", "min: [1, 8, 1]", "min, opt and max must have the same rank"),
        ("max_batch_size: 16", "max_batch_size: 32", "profile max batch 16 < max_batch_size 32"),
        (
            "source: {path: scaler/model.onnx}",
            "source: {export: {module: 'x:y', inputs: {}}}",
            "'source.export' is a key of backend onnxruntime and pytorch recipes, not tensorrt",
        ),
    ],
)
def test_bad_tensorrt_recipes(cli, trt_dir, old, new, words):
    text = (trt_dir / "trt.yaml").read_text()
    assert old in text
    (trt_dir / "trt.yaml").write_text(text.replace(old, new))
    r = cli("validate", trt_dir / "trt.yaml")
    assert r.exit_code == 3 and words in r.stderr, r.stderr


def test_onnxruntime_accelerators(cli, tmp_path, in_root):
    r = cli("build", "recipes/gpu/scaler-ort-trt.yaml", "-o", tmp_path / "OUT")
    assert r.exit_code == 0, r.stderr
    data = (tmp_path / "OUT" / "scaler-ort-trt" / "config.pbtxt").read_bytes()
    assert (
        data
        == (ROOT / "tests" / "fixtures" / "configs" / "onnxruntime-tensorrt-ep.pbtxt").read_bytes()
    )
    acc = parse(data).optimization.execution_accelerators.gpu_execution_accelerator[0]
    assert acc.name == "tensorrt" and acc.parameters["precision_mode"] == "FP16"


@pytest.mark.parametrize(
    "old, new, words",
    [
        ("target: gpu\n", "", "GPU execution accelerators on a cpu target"),
        (
            "trt_engine_cache_path: /tmp/ort-trt-cache",
            "trt_engine_cache_path: cache",
            "must be an absolute path",
        ),
        ("precision_mode: FP16", "precision_mode: INT8", "INT8 needs a calibration table"),
        ("name: tensorrt", "name: tensorrtx", "tensorrtx"),
    ],
)
def test_bad_accelerators(cli, tmp_path, old, new, words):
    text = (
        (ROOT / "recipes" / "gpu" / "scaler-ort-trt.yaml")
        .read_text()
        .replace("../examples/scaler", str(EXAMPLES / "scaler"))
    )
    assert old in text
    p = tmp_path / "r.yaml"
    p.write_text(
        text.replace(old, new).replace("instances: [{kind: gpu, count: 1}]\n", "")
        if old == "target: gpu\n"
        else text.replace(old, new)
    )
    r = cli("validate", p)
    assert r.exit_code == 3 and words in r.stderr, r.stderr
