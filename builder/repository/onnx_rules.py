"""config.pbtxt against the ONNX graph, offline: the onnxruntime backend's own load checks, ported.

Source: triton-inference-server/onnxruntime_backend, commit 17e5cb23a6fbeb37282eb7079dd0b580cd79530d (branch r24.10):
src/onnxruntime.cc ModelInstanceState (expected input count, ValidateInputs, ValidateOutputs) and
src/onnxruntime_utils.cc CompareDimsSupported. Messages are the backend's wording. Not ported: what needs a
session (execution providers, TensorRT EP options) and autocomplete of a config that omits inputs/outputs.
"""

from __future__ import annotations

from pathlib import Path

# ONNX TensorProto element type → Triton TYPE_ name (ModelConfigDataTypeToOnnxDataType / ConvertFromOnnxDataType)
ONNX_TYPES = {1: "FP32", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64", 8: "STRING",
              9: "BOOL", 10: "FP16", 11: "FP64", 12: "UINT32", 13: "UINT64", 16: "BF16"}


def _shape(value_info) -> list[int]:
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return []
    return [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]


def _s(dims) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _compare(model: str, tensor: str, model_shape: list[int], dims: list[int], mbs: int, exact: bool) -> str | None:
    if mbs > 0:
        if not model_shape or model_shape[0] != -1:
            return (f"model '{model}', tensor '{tensor}': for the model to support batching the shape should have "
                    "at least 1 dimension and the first dimension must be -1; but shape expected by the model is "
                    f"{_s(model_shape)}")
        full = [-1, *dims]
        ok = len(model_shape) == len(full) and all(m == f for m, f in zip(model_shape, full) if exact or m != -1)
        if not ok:
            return (f"model '{model}', tensor '{tensor}': the model expects {len(model_shape)} dimensions (shape "
                    f"{_s(model_shape)}) but the model configuration specifies {len(full)} dimensions (an initial "
                    "batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making "
                    f"complete shape {_s(full)})")
        return None
    ok = len(model_shape) == len(dims) and all(m == d for m, d in zip(model_shape, dims) if exact or m != -1)
    if not ok:
        return (f"model '{model}', tensor '{tensor}': the model expects {len(model_shape)} dimensions (shape "
                f"{_s(model_shape)}) but the model configuration specifies {len(dims)} dimensions (shape "
                f"{_s(dims)})")
    return None


def onnx_problems(mc, model_file: Path) -> list[str]:
    """The onnxruntime backend's checks of mc against the graph in model_file (first failure, as the backend)."""
    try:
        import onnx
    except ImportError:
        return []
    try:
        graph = onnx.load(str(model_file), load_external_data=False).graph
    except Exception as e:  # noqa: BLE001 - onnx raises DecodeError and friends on a damaged file
        return [f"{model_file.name} is not a readable ONNX model: {type(e).__name__}: {e}"]
    name = mc.name or model_file.parent.parent.name
    initializers = {i.name for i in graph.initializer}
    inputs = {v.name: v for v in graph.input if v.name not in initializers}
    overridable = {v.name: v for v in graph.input if v.name in initializers}
    outputs = {v.name: v for v in graph.output}
    expected = sum(1 for t in mc.input if not t.optional) + len(mc.batch_input)
    if mc.HasField("sequence_batching"):
        kinds = {c.kind for ci in mc.sequence_batching.control_input for c in ci.control}
        expected += len(kinds) + len(mc.sequence_batching.state)
    if len(inputs) != expected:
        return [f"unable to load model '{name}', configuration expects {expected} inputs, model provides "
                f"{len(inputs)}"]
    known = {**inputs, **overridable}
    for t in mc.input:
        if t.optional and mc.max_batch_size != 0:
            return [f"unable to load model '{name}', optional input '{t.name}' is not supported for models that "
                    "support batching"]
        err = _check_tensor(name, t, known, "input", mc.max_batch_size, exact=False)
        if err:
            return [err]
    batch_outputs = {n for b in mc.batch_output for n in b.target_name}
    for t in mc.output:
        err = _check_tensor(name, t, outputs, "output", mc.max_batch_size, exact=True,
                            skip_dims=t.name in batch_outputs)
        if err:
            return [err]
    return []


def _check_tensor(model: str, t, known: dict, kind: str, mbs: int, *, exact: bool, skip_dims: bool = False
                  ) -> str | None:
    from tritonbuild.repository.config import model_config_pb2

    if t.name not in known:
        allowed = ", ".join(sorted(known))
        return f"unexpected inference {kind} '{t.name}', allowed {kind}s are: {allowed}"
    dtype = model_config_pb2().DataType.Name(t.data_type)
    elem = known[t.name].type.tensor_type.elem_type
    theirs = ONNX_TYPES.get(elem, f"onnx element type {elem}")
    if dtype != f"TYPE_{theirs}":
        return (f"unable to load model '{model}', configuration expects datatype {dtype} for {kind} '{t.name}', "
                f"model provides TYPE_{theirs}")
    dims = list(t.reshape.shape) if t.HasField("reshape") else list(t.dims)
    model_shape = _shape(known[t.name])
    if kind == "input" and t.allow_ragged_batch:
        if model_shape != [-1]:
            return (f"unable to load model '{model}', configuration expects model provides input with shape [-1]  "
                    f"for ragged input '{t.name}', model provides {_s(model_shape)}")
        return None
    if skip_dims:
        return None
    if model_shape:
        return _compare(model, t.name, model_shape, dims, mbs, exact)
    if any(d != 1 for d in dims):
        return (f"unable to load model '{model}', scalar tensor '{t.name}', should only provide 1 in the model "
                "configuration when the model doesn't support batching. Model configuration provided: "
                f"{_s(dims)}.")
    return None
