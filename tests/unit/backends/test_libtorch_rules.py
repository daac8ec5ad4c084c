"""The PyTorch (libtorch) backend's load checks, ported (builder/backends/pytorch/rules.py), against real
TorchScript files. Expected wording from triton-inference-server/pytorch_backend @ e97a9006 (r24.10),
src/libtorch.cc ValidateInputs / ValidateOutputs and src/libtorch_utils.cc ModelConfigDataTypeToTorchType."""

from __future__ import annotations

import pytest

from tritonbuild.backends.pytorch.rules import libtorch_problems
from tritonbuild.triton.config import parse

torch = pytest.importorskip("torch")


class TwoTensors(torch.nn.Module):
    def forward(self, x, y):
        return x + y, x - y


class TensorAndInt(torch.nn.Module):
    def forward(self, x, n: int):
        return x * n


class OneDict(torch.nn.Module):
    def forward(self, d: dict[str, torch.Tensor]):
        return d["a"] + d["b"]


def _save(tmp_path, module) -> object:
    path = tmp_path / "model.pt"
    torch.jit.save(torch.jit.script(module), str(path))
    return path


def _config(
    inputs: str,
    outputs: str = 'output { name: "out__0" data_type: TYPE_FP32 dims: [4] }',
    extra: str = "",
) -> object:
    return parse(
        f'name: "m" backend: "pytorch" max_batch_size: 8 {inputs} {outputs} {extra}'.encode()
    )


X = 'input { name: "x__0" data_type: TYPE_FP32 dims: [4] }'
Y = 'input { name: "y__1" data_type: TYPE_FP32 dims: [4] }'


def test_a_config_that_matches_forward_passes(tmp_path):
    assert libtorch_problems(_config(X + Y), _save(tmp_path, TwoTensors())) == []


def test_an_input_count_that_differs_from_forward_is_refused(tmp_path):
    assert libtorch_problems(_config(X), _save(tmp_path, TwoTensors())) == [
        "unable to load model 'm', configuration expects 1 inputs, model provides 2"
    ]


def test_sequence_controls_and_states_count_as_inputs(tmp_path):
    controls = (
        'sequence_batching { control_input { name: "START" control { kind: CONTROL_SEQUENCE_START '
        "fp32_false_true: [0, 1] } } }"
    )
    assert libtorch_problems(_config(X, extra=controls), _save(tmp_path, TwoTensors())) == []
    assert libtorch_problems(_config(X + Y, extra=controls), _save(tmp_path, TwoTensors())) == [
        "unable to load model 'm', configuration expects 3 inputs, model provides 2"
    ]


def test_a_non_tensor_argument_is_refused(tmp_path):
    problems = libtorch_problems(_config(X + Y), _save(tmp_path, TensorAndInt()))
    assert problems == [
        "An input of type 'int' was detected in the model. Only a single input of type "
        "Dict(str, Tensor) or input(s) of type Tensor are supported."
    ]


def test_one_dict_input_takes_any_number_of_named_inputs(tmp_path):
    a = 'input { name: "a" data_type: TYPE_FP32 dims: [4] }'
    b = 'input { name: "b" data_type: TYPE_FP32 dims: [4] }'
    assert libtorch_problems(_config(a + b), _save(tmp_path, OneDict())) == []


@pytest.mark.parametrize("dtype", ["TYPE_BF16", "TYPE_UINT16", "TYPE_UINT32", "TYPE_UINT64"])
def test_datatypes_torch_has_no_mapping_for_are_refused(tmp_path, dtype):
    x = f'input {{ name: "x__0" data_type: {dtype} dims: [4] }}'
    assert libtorch_problems(_config(x + Y), _save(tmp_path, TwoTensors())) == [
        f"unsupported datatype {dtype} for input 'x__0' for model 'm'"
    ]


def test_strings_must_be_one_dimensional_batch_included(tmp_path):
    s = 'input { name: "x__0" data_type: TYPE_STRING dims: [1] }'
    assert libtorch_problems(_config(s + Y), _save(tmp_path, TwoTensors())) == [
        "Triton only supports 1 dimensional List of String as input for 'x__0' for model 'm'"
    ]
    flat = parse(
        f'name: "m" backend: "pytorch" {s} {Y} output {{ name: "o__0" data_type: TYPE_FP32 dims: [4] }}'.encode()
    )
    assert libtorch_problems(flat, _save(tmp_path, TwoTensors())) == []


def test_a_config_without_outputs_is_refused(tmp_path):
    assert libtorch_problems(_config(X + Y, outputs=""), _save(tmp_path, TwoTensors())) == [
        "model configuration must contain at least one output, none were specified."
    ]
