"""Hand-written model repositories of the structure upstream publishes (facts/triton_repositories.json), written
by the project: each config.pbtxt is built from the recorded fields through Triton's ModelConfig proto, each model
file is ours (a small real ONNX graph, a Python model implementing the recorded auto_complete_config)."""

from __future__ import annotations

import json
from pathlib import Path

from google.protobuf import json_format

from tests.contracts.facts import load
from tritonbuild.triton.config import model_config_pb2, render


def fact(name: str) -> dict:
    return load("triton_repositories")["models"][name]


def _config(name: str, fields: dict) -> bytes:
    mc = json_format.ParseDict({"name": name, **fields}, model_config_pb2().ModelConfig())
    return render(mc)


def _labels(path: Path, count: int) -> None:
    path.write_text("".join(f"label{i}\n" for i in range(count)))


def _densenet_onnx(path: Path, config: dict) -> None:
    """A 1x1 convolution (3 → 1000 channels) then a global average pool: the recorded input and output names,
    the model-side shapes Triton derives ([batch] + input dims; the output's reshape)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inp, out = config["input"][0], config["output"][0]
    channels = out["dims"][0]
    weight = numpy_helper.from_array(np.full((channels, inp["dims"][0], 1, 1), 0.01, np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", [inp["name"], "w"], ["conv"]),
         helper.make_node("GlobalAveragePool", ["conv"], [out["name"]])], "densenet_like",
        [helper.make_tensor_value_info(inp["name"], TensorProto.FLOAT, ["N", *inp["dims"]])],
        [helper.make_tensor_value_info(out["name"], TensorProto.FLOAT, ["N", *out["reshape"]["shape"]])],
        [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))


def write_densenet_onnx(root: Path) -> Path:
    f = fact("densenet_onnx")
    d = root / "densenet_onnx"
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_bytes(_config("densenet_onnx", f["config"]))
    _labels(d / f["config"]["output"][0]["label_filename"], f["config"]["output"][0]["dims"][0])
    _densenet_onnx(d / "1" / "model.onnx", f["config"])
    return d


def write_inception_graphdef(root: Path) -> Path:
    """The GraphDef itself is a placeholder: nothing here opens a TensorFlow model."""
    f = fact("inception_graphdef")
    d = root / "inception_graphdef"
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_bytes(_config("inception_graphdef", f["config"]))
    _labels(d / f["config"]["output"][0]["label_filename"], f["config"]["output"][0]["dims"][0])
    (d / "1" / "model.graphdef").write_bytes(b"\x0a\x00")
    return d


def write_ensemble_over(root: Path, step: str, name: str = "densenet_ensemble") -> Path:
    """An ensemble of the recorded preprocess_resnet50_ensemble's structure (its own output carries a label
    file beside its config.pbtxt) over one step model."""
    f, step_config = fact("preprocess_resnet50_ensemble"), fact(step)["config"]
    inp, out = step_config["input"][0], step_config["output"][0]
    label = f["config"]["output_label_filename"]
    fields = {"platform": f["config"]["platform"], "max_batch_size": step_config["max_batch_size"],
              "input": [{"name": "IMAGE", "data_type": inp["data_type"], "dims": inp["dims"]}],
              "output": [{"name": "SCORES", "data_type": out["data_type"], "dims": out["dims"],
                          "label_filename": label}],
              "ensemble_scheduling": {"step": [{"model_name": step, "model_version": -1,
                                                "input_map": {inp["name"]: "IMAGE"},
                                                "output_map": {out["name"]: "SCORES"}}]}}
    d = root / name
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_bytes(_config(name, fields))
    _labels(d / label, out["dims"][0])
    return d


AUTO_COMPLETE_MODEL = '''import numpy as np
import triton_python_backend_utils as pb_utils

SPEC = {spec}


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        for tensor in SPEC["input"]:
            config.add_input(tensor)
        for tensor in SPEC["output"]:
            config.add_output(tensor)
        config.set_max_batch_size(SPEC["max_batch_size"])
        if SPEC.get("dynamic_batching"):
            config.set_dynamic_batching()
        return config

    def execute(self, requests):
        out = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (a + b).astype(np.float32)),
                                                   pb_utils.Tensor("OUTPUT1", (a - b).astype(np.float32))]))
        return out
'''


def write_batch_auto_complete(root: Path) -> Path:
    """No config.pbtxt: only 1/model.py, whose auto_complete_config declares the recorded batching and I/O."""
    d = root / "batch_auto_complete"
    (d / "1").mkdir(parents=True)
    spec = fact("batch_auto_complete")["auto_complete"]
    (d / "1" / "model.py").write_text(AUTO_COMPLETE_MODEL.format(spec=repr(spec)))
    return d


def write_vllm_model(root: Path, **config) -> Path:
    f = fact("vllm_model")
    d = root / "vllm_model"
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_bytes(_config("vllm_model", {**f["config"], **config}))
    (d / "1" / "model.json").write_text(json.dumps(f["model_json"]))
    return d


ADD_SUB_MODEL = '''import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.dtypes = [pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, name)["data_type"])
                       for name in ("OUTPUT0", "OUTPUT1")]

    def execute(self, requests):
        out = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (a + b).astype(self.dtypes[0])),
                                                   pb_utils.Tensor("OUTPUT1", (a - b).astype(self.dtypes[1]))]))
        return out
'''


def write_add_sub(root: Path) -> Path:
    """python_backend's add_sub: the recorded config, and a model.py of ours doing what upstream's does."""
    d = root / "add_sub"
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_bytes(_config("add_sub", fact("add_sub")["config"]))
    (d / "1" / "model.py").write_text(ADD_SUB_MODEL)
    return d
