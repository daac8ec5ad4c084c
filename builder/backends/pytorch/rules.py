"""config.pbtxt against a TorchScript model.pt, offline: the PyTorch (libtorch) backend's own load
checks, ported, on the TorchScript forward() schema torch reports.

Source: triton-inference-server/pytorch_backend, commit e97a90061f7399b25368e2cb1f6d5c40f8cbae4e
(branch r24.10 = tritonserver 2.51): src/libtorch.cc ModelInstanceState (expected input count from
input + batch_input + the sequence controls and states, ValidateInputs, ValidateOutputs) and
src/libtorch_utils.cc ModelConfigDataTypeToTorchType. Messages are the backend's wording. The
backend stops at its first error; this reports every one. Not ported: the naming-convention fallback
(a warning there, not a refusal) and anything the torch_aoti (model.pt2) path does — 2.51's backend
does not know that platform.
"""

from __future__ import annotations

from pathlib import Path

# ModelConfigDataTypeToTorchType: the TYPE_ names the backend maps to a torch dtype (TYPE_STRING is
# handled apart).
TORCH_DTYPES = ("BOOL", "UINT8", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64")
SEQUENCE_CONTROLS = (
    "CONTROL_SEQUENCE_START",
    "CONTROL_SEQUENCE_END",
    "CONTROL_SEQUENCE_READY",
    "CONTROL_SEQUENCE_CORRID",
)


def _dtype_name(mc, value: int) -> str:
    return (
        type(mc)
        .DESCRIPTOR.fields_by_name["input"]
        .message_type.fields_by_name["data_type"]
        .enum_type.values_by_number[value]
        .name
    )


def _control_names(mc) -> set[str]:
    enum = mc.sequence_batching.DESCRIPTOR.nested_types_by_name["Control"].enum_types_by_name[
        "Kind"
    ]
    return {
        enum.values_by_number[c.kind].name
        for ci in mc.sequence_batching.control_input
        for c in ci.control
    }


def expected_input_count(mc) -> int:
    """What the backend expects forward() to take: inputs + batch inputs + the sequence controls and
    states."""
    count = len(mc.input) + len(mc.batch_input)
    if mc.HasField("sequence_batching"):
        count += len(_control_names(mc) & set(SEQUENCE_CONTROLS)) + len(mc.sequence_batching.state)
    return count


def config_problems(mc) -> list[str]:
    """The checks that need only the config (datatypes, string ranks, at least one input and
    output)."""
    model, out = mc.name, []
    if not len(mc.input):
        out.append("model configuration must contain at least one input, none were specified.")
    if not len(mc.output):
        out.append("model configuration must contain at least one output, none were specified.")
    for kind, tensors in (("input", mc.input), ("output", mc.output)):
        for t in tensors:
            dtype = _dtype_name(mc, t.data_type)
            if dtype.removeprefix("TYPE_") not in TORCH_DTYPES and dtype != "TYPE_STRING":
                out.append(
                    f"unsupported datatype {dtype} for {kind} '{t.name}' for model '{model}'"
                )
            elif dtype == "TYPE_STRING":
                dims = list(t.reshape.shape) if t.HasField("reshape") else list(t.dims)
                if len(dims) + (1 if mc.max_batch_size > 0 else 0) > 1:
                    out.append(
                        f"Triton only supports 1 dimensional List of String as {kind} for "
                        f"'{t.name}' for model '{model}'"
                    )
    return out


def forward_problems(mc, arguments: list[tuple[str, str]]) -> list[str]:
    """ValidateInputs on forward()'s arguments, given as (type kind, type string) pairs — torch's
    c10::TypeKind names, e.g. ('ClassType', '__torch__.M'), ('TensorType', 'Tensor')."""
    start = 1 if arguments and arguments[0][0] == "ClassType" else 0
    args = arguments[start:]
    if len(args) == 1 and args[0][0] == "DictType":
        return []  # one Dict(str, Tensor) input: the config's names are its keys, any count
    out = []
    if any(kind == "DictType" for kind, _ in args[1:]):
        out.append(
            "Multiple inputs of kind DictType were detected. Only a single input of type "
            "Dict(str, Tensor) is supported."
        )
    for kind, text in args:
        if kind not in ("TensorType", "ListType"):
            out.append(
                f"An input of type '{text}' was detected in the model. Only a single input of type "
                "Dict(str, Tensor) or input(s) of type Tensor are supported."
            )
    expected = expected_input_count(mc)
    if args and len(args) != expected:
        out.append(
            f"unable to load model '{mc.name}', configuration expects {expected} inputs, model "
            f"provides {len(args)}"
        )
    return out


def torchscript_arguments(model_file: Path) -> list[tuple[str, str]]:
    """forward()'s arguments of a TorchScript file as (type kind, type string), self included: read from the
    archive's own code where its signature is one the backend takes as it is (backends/pytorch/archive.py), else
    from torch's schema."""
    from tritonbuild.backends.pytorch.archive import archive_arguments

    read = archive_arguments(model_file)
    if read is not None:
        return read
    import torch

    module = torch.jit.load(str(model_file), map_location="cpu")
    return [(a.type.kind(), str(a.type)) for a in module.forward.schema.arguments]


def libtorch_problems(mc, model_file: Path) -> list[str]:
    """Every load check of the r24.10 PyTorch backend this config fails on this TorchScript file."""
    return forward_problems(mc, torchscript_arguments(model_file)) + config_problems(mc)
