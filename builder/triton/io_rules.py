"""Triton's rules for a model's inputs and outputs, ported rule for rule (Triton's wording): each
tensor's name, type and shape against its reshape (ValidateModelIOConfig, ValidateIOShape), formats
only TensorRT takes, and the batch inputs and outputs (ValidateBatchIO). Source:
triton-inference-server/core at bfec7c61dc0939433f64f14e89b1973073eac8ba (r24.10),
src/model_config_utils.cc; triton/rules.py runs them with the rest of ValidateModelConfig."""

from __future__ import annotations

from tritonbuild.triton.config import enum_name

WILDCARD = -1


def _element_count(dims) -> int:
    """triton::common::GetElementCount: -1 if any wildcard, 0 for an empty shape."""
    cnt = 0
    for d in dims:
        if d == WILDCARD:
            return -1
        cnt = d if cnt == 0 else cnt * d
    return cnt


def _chunks(dims) -> list[int]:
    out, cur = [], 1
    for d in dims:
        if d != WILDCARD:
            cur *= d
        else:
            out.append(cur)
            cur = 1
    return [*out, cur]


def _io_shape(tensor, mbs: int, prefix: str) -> str | None:
    if not tensor.name:
        return f"{prefix}must specify 'name'"
    pre = f"{prefix}'{tensor.name}' "
    if tensor.data_type == 0:
        return pre + "must specify 'data_type'"
    if not len(tensor.dims):
        return pre + "must specify 'dims'"
    if tensor.HasField("reshape") and not len(tensor.reshape.shape) and mbs == 0:
        return (
            pre
            + "cannot have empty reshape for non-batching model as scalar tensors are not supported"
        )
    if any(d < 1 and d != WILDCARD for d in tensor.dims):
        return pre + "dimension must be integer >= 1, or -1 to indicate a variable-size dimension"
    if tensor.HasField("reshape"):
        if any(d < 1 and d != WILDCARD for d in tensor.reshape.shape):
            return (
                pre
                + "reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension"
            )
        ds, rs = _element_count(tensor.dims), _element_count(tensor.reshape.shape)
        if ds != rs and (rs != 0 or ds != 1):
            return pre + "has different size for dims and reshape"
        if ds == -1:
            a, b = _chunks(tensor.dims), _chunks(tensor.reshape.shape)
            if len(a) != len(b):
                return pre + "has different number of variable-size dimensions for dims and reshape"
            if a != b:
                return pre + "has different size for dims and reshape"
    return None


def io_problems(mc, name: str, platform: str) -> list[str]:
    problems = []
    trt = platform == "tensorrt_plan"
    for kind, tensors in (("input", mc.input), ("output", mc.output)):
        for tensor in tensors:
            err = _io_shape(tensor, mc.max_batch_size, f"model {kind} ")
            if err is None and kind == "input":
                fmt = enum_name(tensor, "format", tensor.format)
                if fmt in ("FORMAT_NHWC", "FORMAT_NCHW") and len(tensor.dims) != 3:
                    err = "model input NHWC/NCHW require 3 dims"
            if err is None and not trt and tensor.is_shape_tensor:
                err = "shape tensors are only supported for TensorRT platform"
            if err is None and tensor.is_non_linear_format_io:
                if not trt:
                    err = "Non-linear IO format is only supported for the TensorRT platform"
                elif len(tensor.dims) != 3:
                    err = f"Non-linear IO format {kind} requires 3 dims"
            if err:
                problems.append(f"{err} for {name}")
    problems += [f"{e} for {name}" for e in _batch_io(mc)]
    return problems


def _batch_io(mc) -> list[str]:
    problems = []
    inputs, outputs = {tensor.name for tensor in mc.input}, {tensor.name for tensor in mc.output}
    for b in mc.batch_input:
        kind = enum_name(b, "kind", b.kind)
        if len(b.source_input) != 1:
            problems.append(
                f"batch input kind '{kind}' expects 1 source input, got {len(b.source_input)}"
            )
        dtype = enum_name(b, "data_type", b.data_type)
        if dtype not in ("TYPE_INT32", "TYPE_FP32"):
            problems.append(
                f"unexpected batch input data type '{dtype}'"
                if dtype == "TYPE_INVALID"
                else "batch input data type must be TYPE_INT32 or TYPE_FP32"
            )
        problems += [f"unknown source input name '{s}'" for s in b.source_input if s not in inputs]
    for b in mc.batch_output:
        kind = enum_name(b, "kind", b.kind)
        if len(b.source_input) != 1:
            problems.append(
                f"batch output kind '{kind}' expects 1 source input, got {len(b.source_input)}"
            )
        problems += [f"unknown source input name '{s}'" for s in b.source_input if s not in inputs]
        seen = set()
        for tensor in b.target_name:
            if tensor not in outputs:
                problems.append(f"unknown target output name '{tensor}'")
            elif tensor in seen:
                problems.append(f"target output name '{tensor}' can only be specified once")
            seen.add(tensor)
    return problems
