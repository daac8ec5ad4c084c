"""config.pbtxt against the ONNX graph: the onnxruntime backend's load checks (r24.10), offline."""

from __future__ import annotations

import pytest

from tritonbuild.repository.rules import check_model_dir

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402


def _graph(path, x_shape, y_shape, dtype=TensorProto.FLOAT):
    g = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", dtype, x_shape)],
        [helper.make_tensor_value_info("y", dtype, y_shape)],
    )
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


CONFIG = (
    'name: "m" backend: "onnxruntime" max_batch_size: 8\n'
    'input { name: "x" data_type: TYPE_FP32 dims: [4] }\noutput { name: "y" data_type: TYPE_FP32 dims: [4] }\n'
)


def _onnx_row(tmp_path, config, x_shape=("N", 4), y_shape=("N", 4), dtype=TensorProto.FLOAT):
    d = tmp_path / "m"
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_text(config)
    _graph(d / "1" / "model.onnx", list(x_shape), list(y_shape), dtype)
    assert not [
        f for f in check_model_dir(d) if f.check == "onnx"
    ]  # a build does not open model files
    (row,) = [f for f in check_model_dir(d, model_files=True) if f.check == "onnx"]
    return row


def test_matching_graph_passes(tmp_path):
    assert _onnx_row(tmp_path, CONFIG).ok


@pytest.mark.parametrize(
    "config, x_shape, dtype, words",
    [
        (
            CONFIG,
            (4,),
            TensorProto.FLOAT,
            "for the model to support batching the shape should have at least 1 "
            "dimension and the first dimension must be -1; but shape expected by the "
            "model is [4]",
        ),
        (
            CONFIG.replace("dims: [4] }\noutput", "dims: [5] }\noutput"),
            ("N", 4),
            TensorProto.FLOAT,
            "the model expects 2 dimensions (shape [-1,4]) but the model configuration specifies 2 dimensions",
        ),
        (
            CONFIG,
            ("N", 4),
            TensorProto.DOUBLE,
            "configuration expects datatype TYPE_FP32 for input 'x', model provides TYPE_FP64",
        ),
        (
            CONFIG.replace('name: "x"', 'name: "a"'),
            ("N", 4),
            TensorProto.FLOAT,
            "unexpected inference input 'a', allowed inputs are: x",
        ),
        (
            CONFIG.replace("max_batch_size: 8", "max_batch_size: 0"),
            ("N", 4),
            TensorProto.FLOAT,
            "the model expects 2 dimensions (shape [-1,4]) but the model configuration specifies 1 dimensions (shape [4])",  # noqa: E501 - Triton's message
        ),
        (
            CONFIG + 'input { name: "z" data_type: TYPE_FP32 dims: [4] }\n',
            ("N", 4),
            TensorProto.FLOAT,
            "configuration expects 2 inputs, model provides 1",
        ),
    ],
)
def test_onnxruntime_backend_refusals(tmp_path, config, x_shape, dtype, words):
    row = _onnx_row(tmp_path, config, x_shape=x_shape, dtype=dtype)
    assert not row.ok and words in row.detail, row.detail
