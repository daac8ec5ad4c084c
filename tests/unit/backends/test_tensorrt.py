"""TensorRT plans: exact trtexec argv and Python-API calls; skip, prebuilt plan, config fields, bad profiles."""

from __future__ import annotations

from tritonbuild.backends.tensorrt.backend import TensorRTOptions, python_api_spec, trtexec_argv

OPTS = TensorRTOptions(
    profiles=[
        {"x": {"min": [1, 8], "opt": [8, 8], "max": [16, 8]}},
        {"x": {"min": [1, 8], "opt": [1, 8], "max": [2, 8]}},
    ],
    fp16=True,
    workspace_mib=512,
)


def test_trtexec_argv():
    assert trtexec_argv(OPTS, "/m.onnx", "/out/model.plan", "/cache/t.cache") == [
        "trtexec",
        "--onnx=/m.onnx",
        "--saveEngine=/out/model.plan",
        "--memPoolSize=workspace:512M",
        "--builderOptimizationLevel=3",
        "--timingCacheFile=/cache/t.cache",
        "--skipInference",
        "--minShapes=x:1x8",
        "--optShapes=x:8x8",
        "--maxShapes=x:16x8",
        "--profile=1",
        "--minShapes=x:1x8",
        "--optShapes=x:1x8",
        "--maxShapes=x:2x8",
        "--fp16",
    ]


def test_python_api_spec_makes_the_same_choices():
    spec = python_api_spec(OPTS, "/m.onnx", "/p", "/c")
    assert spec["workspace_bytes"] == 512 << 20 and spec["fp16"] and not spec["int8"]
    assert spec["profiles"][0] == {"x": {"min": [1, 8], "opt": [8, 8], "max": [16, 8]}}
    assert spec["timing_cache"] == "/c"
