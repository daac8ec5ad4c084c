"""Hand-written model repositories of the structure upstream publishes (facts/triton_repositories.json), written
by the project: each config.pbtxt is built from the recorded fields through Triton's ModelConfig proto, each model
file is ours (a small real ONNX graph, a Python model implementing the recorded auto_complete_config)."""

from __future__ import annotations

import json
import re
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
    weight = numpy_helper.from_array(
        np.full((channels, inp["dims"][0], 1, 1), 0.01, np.float32), "w"
    )
    graph = helper.make_graph(
        [
            helper.make_node("Conv", [inp["name"], "w"], ["conv"]),
            helper.make_node("GlobalAveragePool", ["conv"], [out["name"]]),
        ],
        "densenet_like",
        [helper.make_tensor_value_info(inp["name"], TensorProto.FLOAT, ["N", *inp["dims"]])],
        [
            helper.make_tensor_value_info(
                out["name"], TensorProto.FLOAT, ["N", *out["reshape"]["shape"]]
            )
        ],
        [weight],
    )
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
    fields = {
        "platform": f["config"]["platform"],
        "max_batch_size": step_config["max_batch_size"],
        "input": [{"name": "IMAGE", "data_type": inp["data_type"], "dims": inp["dims"]}],
        "output": [
            {
                "name": "SCORES",
                "data_type": out["data_type"],
                "dims": out["dims"],
                "label_filename": label,
            }
        ],
        "ensemble_scheduling": {
            "step": [
                {
                    "model_name": step,
                    "model_version": -1,
                    "input_map": {inp["name"]: "IMAGE"},
                    "output_map": {out["name"]: "SCORES"},
                }
            ]
        },
    }
    d = root / name
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_bytes(_config(name, fields))
    _labels(d / label, out["dims"][0])
    return d


AUTO_COMPLETE_MODEL = """import numpy as np
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
"""


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


ADD_SUB_MODEL = """import json

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
"""


def write_add_sub(root: Path, name: str = "add_sub") -> Path:
    """python_backend's add_sub: the recorded config, and a model.py of ours doing what upstream's does."""
    d = root / name
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_bytes(_config(name, fact("add_sub")["config"]))
    (d / "1" / "model.py").write_text(ADD_SUB_MODEL)
    return d


def write_add_sub_ensemble(
    root: Path,
    steps: tuple[str, str] = ("add_sub", "add_sub"),
    name: str = "add_sub_twice",
    **fields,
) -> Path:
    """An ensemble (the recorded ensemble platform, Triton's ensemble_scheduling fields) of two add_sub-shaped
    steps: the first's sum and difference feed the second, whose outputs are the ensemble's (2*a and 2*b). The
    step models are not written here."""
    tensors = fact("add_sub")["config"]
    first, second = steps
    mapping = [
        {
            "model_name": first,
            "model_version": -1,
            "input_map": {"INPUT0": "INPUT0", "INPUT1": "INPUT1"},
            "output_map": {"OUTPUT0": "sum", "OUTPUT1": "difference"},
        },
        {
            "model_name": second,
            "model_version": -1,
            "input_map": {"INPUT0": "sum", "INPUT1": "difference"},
            "output_map": {"OUTPUT0": "OUTPUT0", "OUTPUT1": "OUTPUT1"},
        },
    ]
    config = {
        "platform": fact("preprocess_resnet50_ensemble")["config"]["platform"],
        "input": tensors["input"],
        "output": tensors["output"],
        "ensemble_scheduling": {"step": mapping},
        **fields,
    }
    d = root / name
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_bytes(_config(name, config))
    return d


# --- a tensorrtllm_backend inflight_batcher_llm group, filled as fill_template.py fills it ---------------------

_UNFILLED = 987654321  # an integer field whose placeholder stays: written, then replaced by the ${name} text


def release(tag: str) -> dict:
    return load("tensorrtllm_releases")["releases"][tag]


def _substitute(value, subs: dict[str, str]):
    """fill_template.py's safe_substitute on one recorded value: a placeholder it does not fill stays."""
    if not isinstance(value, str):
        return value
    return re.sub(r"\$\{(\w+)\}", lambda m: str(subs.get(m.group(1), m.group(0))), value)


def _int(value: str, unfilled: dict[int, str]) -> int:
    if "${" in value:
        unfilled[_UNFILLED + len(unfilled)] = value
        return _UNFILLED + len(unfilled) - 1
    return int(value)


def _group_config(t: dict, subs: dict[str, str], unfilled: dict[int, str]) -> dict:
    """The recorded template structure, filled, as a ModelConfig dict (tensors, batching, parameters, steps)."""
    s = {k: _substitute(v, subs) for k, v in t.items() if isinstance(v, str)}
    fields = {key: s[key] for key in ("backend", "platform") if key in s}
    fields["max_batch_size"] = _int(s["max_batch_size"], unfilled)
    if t.get("decoupled"):
        fields["model_transaction_policy"] = {
            "decoupled": _substitute(t["decoupled"], subs).lower() == "true"
        }
    if t.get("dynamic_batching") is not None:
        db = {k: _substitute(v, subs) for k, v in t["dynamic_batching"].items()}
        fields["dynamic_batching"] = {
            **(
                {
                    "preferred_batch_size": [
                        _int(v, unfilled)
                        for v in db["preferred_batch_size"].strip("[] ").split(",")
                    ]
                }
                if "preferred_batch_size" in db
                else {}
            ),
            **(
                {"max_queue_delay_microseconds": _int(db["max_queue_delay_microseconds"], unfilled)}
                if "max_queue_delay_microseconds" in db
                else {}
            ),
            **(
                {"default_queue_policy": {"max_queue_size": _int(db["max_queue_size"], unfilled)}}
                if "max_queue_size" in db
                else {}
            ),
        }
    for kind in ("input", "output"):
        fields[kind] = [
            {
                **{k: _substitute(v, subs) for k, v in x.items() if k != "reshape"},
                **({"reshape": {"shape": x["reshape"]}} if "reshape" in x else {}),
            }
            for x in t[kind + "s"]
        ]
    if t.get("instance_group"):
        fields["instance_group"] = [
            {"kind": g["kind"], "count": _int(_substitute(g["count"], subs), unfilled)}
            for g in t["instance_group"]
        ]
    if t["parameters"]:
        fields["parameters"] = {
            k: {"string_value": _substitute(v, subs)} for k, v in t["parameters"].items()
        }
    if t.get("steps"):
        fields["ensemble_scheduling"] = {"step": t["steps"]}
    return fields


TOKENIZING_MODEL = '''import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils
from tokenizers import Tokenizer

REQUIRED = {required}


class TritonPythonModel:
    """What upstream's {name} reads at initialize(): its required parameters (a missing key raises KeyError),
    and the tokenizer it loads from tokenizer_dir (upstream: transformers' AutoTokenizer; here: tokenizers)."""

    def initialize(self, args):
        params = json.loads(args["model_config"])["parameters"]
        values = {{key: params[key]["string_value"] for key in REQUIRED}}
        self.tokenizer = Tokenizer.from_file(str(Path(values["tokenizer_dir"]) / "tokenizer.json"))

    def execute(self, requests):
        raise NotImplementedError("initialize() is what this stand-in of upstream's model shows")
'''

BLS_MODEL = '''import json

import triton_python_backend_utils as pb_utils

OPTIONAL = {optional}


class TritonPythonModel:
    """What upstream's tensorrt_llm_bls reads at initialize(): optional parameters, '' or ${{...}} = unset."""

    def initialize(self, args):
        params = json.loads(args["model_config"])["parameters"]
        values = {{key: params.get(key, {{}}).get("string_value", "") for key in OPTIONAL}}
        self.values = {{k: v for k, v in values.items() if v and not v.startswith("${{")}}

    def execute(self, requests):
        raise NotImplementedError("initialize() is what this stand-in of upstream's model shows")
'''


def write_trtllm_group(root: Path, tag: str, **overrides: dict[str, str]) -> Path:
    """The five models of tensorrtllm_backend's inflight_batcher_llm at `tag`, each config filled with the
    release's fill_template defaults and its README's substitutions (plus overrides[model]; None = a key the
    command line does not fill); the Python models
    are ours, reading what upstream's read at initialize(); tensorrt_llm/1/ is empty (the engine is elsewhere:
    gpt_model_path)."""
    r = release(tag)
    for model, t in r["templates"].items():
        line = {
            **r["readme_fill"]["models"].get(model, {}).get("substitutions", {}),
            **overrides.get(model, {}),
        }
        subs = {**r["fill_defaults"]["values"], **{k: v for k, v in line.items() if v is not None}}
        unfilled: dict[int, str] = {}
        mc = json_format.ParseDict(
            {"name": model, **_group_config(t, subs, unfilled)}, model_config_pb2().ModelConfig()
        )
        text = render(mc).decode()
        for sentinel, placeholder in unfilled.items():
            text = text.replace(str(sentinel), placeholder)
        d = root / model
        (d / "1").mkdir(parents=True)
        (d / "config.pbtxt").write_text(text)
        py = r["python_models"].get(model)
        if py is None:
            continue
        source = (
            BLS_MODEL.format(optional=sorted(py["optional_parameters"]))
            if model == "tensorrt_llm_bls"
            else TOKENIZING_MODEL.format(required=sorted(py["required_parameters"]), name=model)
        )
        (d / "1" / "model.py").write_text(source)
    return root


def _add_sub_onnx(path: Path, config: dict) -> None:
    """OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, the config's names and shapes."""
    import onnx
    from onnx import TensorProto, helper

    (a, b), (s, d) = [t["name"] for t in config["input"]], [t["name"] for t in config["output"]]
    shape = config["input"][0]["dims"]
    value = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)  # noqa: E731
    graph = helper.make_graph(
        [helper.make_node("Add", [a, b], [s]), helper.make_node("Sub", [a, b], [d])],
        "add_sub",
        [value(a), value(b)],
        [value(s), value(d)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))


def write_add_sub_onnx(root: Path, name: str = "add_sub_onnx", **fields) -> Path:
    """add_sub's recorded config served as an ONNX graph of ours (platform onnxruntime_onnx, as the server's QA
    add/sub models are): the same tensors, the same answers."""
    config = {k: v for k, v in fact("add_sub")["config"].items() if k != "backend"}
    d = root / name
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_bytes(
        _config(name, {"platform": "onnxruntime_onnx", **config, **fields})
    )
    _add_sub_onnx(d / "1" / "model.onnx", config)
    return d


def write_add_sub_torchscript(root: Path, name: str = "add_sub_torch") -> Path:
    """add_sub as a TorchScript module of ours (platform pytorch_libtorch): the libtorch backend's INPUT__0 naming."""
    import torch

    class AddSub(torch.nn.Module):
        def forward(self, a, b):
            return a + b, a - b

    config = fact("add_sub")["config"]

    def rename(kind):
        return [{**t, "name": f"{kind.upper()}__{i}"} for i, t in enumerate(config[kind])]

    d = root / name
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_bytes(
        _config(
            name,
            {
                "platform": "pytorch_libtorch",
                "input": rename("input"),
                "output": rename("output"),
                "instance_group": config["instance_group"],
            },
        )
    )
    torch.jit.script(AddSub()).save(str(d / "1" / "model.pt"))
    return d
