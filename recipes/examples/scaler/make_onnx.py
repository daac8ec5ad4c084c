"""Regenerate model.onnx: y = x * scale + bias over 8 features, dynamic batch (deterministic bytes)."""

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main() -> None:
    rng = np.random.default_rng(3)
    scale = numpy_helper.from_array(rng.random(8).astype(np.float32), "scale")
    bias = numpy_helper.from_array(rng.random(8).astype(np.float32), "bias")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])
    graph = helper.make_graph([helper.make_node("Mul", ["x", "scale"], ["t"]), helper.make_node("Add", ["t", "bias"], ["y"])],
                              "scaler", [x], [y], initializer=[scale, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tritonbuild-example")
    model.ir_version = 8
    onnx.checker.check_model(model)
    (Path(__file__).parent / "model.onnx").write_bytes(model.SerializeToString())


if __name__ == "__main__":
    main()
