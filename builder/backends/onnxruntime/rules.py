"""config.pbtxt against the ONNX model, offline: the onnxruntime backend's own load checks, ported,
on what an onnxruntime session reports (ORT infers shapes the graph leaves symbolic; the backend
asks the session).

Source: triton-inference-server/onnxruntime_backend, commit 17e5cb23a6fbeb37282eb7079dd0b580cd79530d
(branch r24.10): src/onnxruntime.cc ModelInstanceState (expected input count, ValidateInputs,
ValidateOutputs) and src/onnxruntime_utils.cc CompareDimsSupported. Messages are the backend's
wording. Not ported: what needs a session (execution providers, TensorRT EP options) and
autocomplete of a config that omits inputs/outputs.
"""

from __future__ import annotations

from pathlib import Path

# ONNX TensorProto element type → Triton TYPE_ name (ModelConfigDataTypeToOnnxDataType /
# ConvertFromOnnxDataType)
ONNX_TYPES = {
    1: "FP32",
    2: "UINT8",
    3: "INT8",
    4: "UINT16",
    5: "INT16",
    6: "INT32",
    7: "INT64",
    8: "STRING",
    9: "BOOL",
    10: "FP16",
    11: "FP64",
    12: "UINT32",
    13: "UINT64",
    16: "BF16",
}


def _shape(value_info) -> list[int]:
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return []
    return [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]


def _s(dims) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _compare(
    model: str, tensor: str, model_shape: list[int], dims: list[int], mbs: int, exact: bool
) -> str | None:
    if mbs > 0:
        if not model_shape or model_shape[0] != -1:
            return (
                f"model '{model}', tensor '{tensor}': for the model to support batching the shape "
                "should have at least 1 dimension and the first dimension must be -1; but shape "
                f"expected by the model is {_s(model_shape)}"
            )
        full = [-1, *dims]
        ok = len(model_shape) == len(full) and all(
            got == f for got, f in zip(model_shape, full, strict=True) if exact or got != -1
        )
        if not ok:
            return (
                f"model '{model}', tensor '{tensor}': the model expects {len(model_shape)} "
                f"dimensions (shape {_s(model_shape)}) but the model configuration specifies "
                f"{len(full)} dimensions (an initial batch dimension because max_batch_size > 0 "
                f"followed by the explicit tensor shape, making complete shape {_s(full)})"
            )
        return None
    ok = len(model_shape) == len(dims) and all(
        got == d for got, d in zip(model_shape, dims, strict=True) if exact or got != -1
    )
    if not ok:
        return (
            f"model '{model}', tensor '{tensor}': the model expects {len(model_shape)} dimensions "
            f"(shape {_s(model_shape)}) but the model configuration specifies {len(dims)} "
            f"dimensions (shape {_s(dims)})"
        )
    return None


ORT_TYPES = {
    "float": "FP32",
    "uint8": "UINT8",
    "int8": "INT8",
    "uint16": "UINT16",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "string": "STRING",
    "bool": "BOOL",
    "float16": "FP16",
    "double": "FP64",
    "uint32": "UINT32",
    "uint64": "UINT64",
    "bfloat16": "BF16",
}


class _Info:
    """A tensor as the onnxruntime session reports it (after ORT's own shape inference): elem type,
    dims."""

    def __init__(self, dtype: str, dims: list[int]):
        self.dtype, self.dims = dtype, dims


def _session_infos(model_file: Path) -> tuple[dict, dict, dict] | str:
    """(inputs, overridable initializers, outputs) as the backend's session sees them; onnxruntime
    when installed (it infers shapes the graph leaves symbolic), else the graph after onnx shape
    inference."""

    def ort_info(a) -> _Info:
        t = a.type.removeprefix("tensor(").removesuffix(")")
        return _Info(
            ORT_TYPES.get(t, t),
            [d if isinstance(d, int) and d >= 0 else -1 for d in (a.shape or [])],
        )

    try:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        sess = ort.InferenceSession(str(model_file), opts, providers=["CPUExecutionProvider"])
        return (
            {a.name: ort_info(a) for a in sess.get_inputs()},
            {a.name: ort_info(a) for a in sess.get_overridable_initializers()},
            {a.name: ort_info(a) for a in sess.get_outputs()},
        )
    except ImportError:
        pass
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own types on a bad model
        first = str(e).splitlines()[0]
        return f"{model_file.name} does not load in onnxruntime: {type(e).__name__}: {first}"
    try:
        import onnx
    except ImportError:
        return {}, {}, {}
    try:
        graph = onnx.shape_inference.infer_shapes(
            onnx.load(str(model_file), load_external_data=False)
        ).graph
    except Exception as e:  # noqa: BLE001 - onnx raises DecodeError and friends on a damaged file
        return f"{model_file.name} is not a readable ONNX model: {type(e).__name__}: {e}"

    def info(v) -> _Info:
        elem = v.type.tensor_type.elem_type
        return _Info(ONNX_TYPES.get(elem, f"onnx element type {elem}"), _shape(v))

    inits = {i.name for i in graph.initializer}
    return (
        {v.name: info(v) for v in graph.input if v.name not in inits},
        {v.name: info(v) for v in graph.input if v.name in inits},
        {v.name: info(v) for v in graph.output},
    )


def onnx_problems(mc, model_file: Path) -> list[str]:
    """The onnxruntime backend's checks of mc against the model in model_file (first failure, as the
    backend)."""
    infos = _session_infos(model_file)
    if isinstance(infos, str):
        return [infos]
    inputs, overridable, outputs = infos
    if not (inputs or outputs):
        return []
    name = mc.name or model_file.parent.parent.name
    expected = sum(1 for t in mc.input if not t.optional) + len(mc.batch_input)
    if mc.HasField("sequence_batching"):
        kinds = {c.kind for ci in mc.sequence_batching.control_input for c in ci.control}
        expected += len(kinds) + len(mc.sequence_batching.state)
    if len(inputs) != expected:
        return [
            f"unable to load model '{name}', configuration expects {expected} inputs, model "
            f"provides {len(inputs)}"
        ]
    known = {**inputs, **overridable}
    for t in mc.input:
        if t.optional and mc.max_batch_size != 0:
            return [
                f"unable to load model '{name}', optional input '{t.name}' is not supported for "
                "models that support batching"
            ]
        err = _check_tensor(name, t, known, "input", mc.max_batch_size, exact=False)
        if err:
            return [err]
    batch_outputs = {n for b in mc.batch_output for n in b.target_name}
    for t in mc.output:
        err = _check_tensor(
            name,
            t,
            outputs,
            "output",
            mc.max_batch_size,
            exact=True,
            skip_dims=t.name in batch_outputs,
        )
        if err:
            return [err]
    return []


def _check_tensor(
    model: str, t, known: dict, kind: str, mbs: int, *, exact: bool, skip_dims: bool = False
) -> str | None:
    from tritonbuild.triton.config import model_config_pb2

    if t.name not in known:
        allowed = ", ".join(sorted(known))
        return f"unexpected inference {kind} '{t.name}', allowed {kind}s are: {allowed}"
    dtype = model_config_pb2().DataType.Name(t.data_type)
    theirs = known[t.name].dtype
    if dtype != f"TYPE_{theirs}":
        return (
            f"unable to load model '{model}', configuration expects datatype {dtype} for {kind} "
            f"'{t.name}', model provides TYPE_{theirs}"
        )
    dims = list(t.reshape.shape) if t.HasField("reshape") else list(t.dims)
    model_shape = known[t.name].dims
    if kind == "input" and t.allow_ragged_batch:
        if model_shape != [-1]:
            return (
                f"unable to load model '{model}', configuration expects model provides input with "
                f"shape [-1]  for ragged input '{t.name}', model provides {_s(model_shape)}"
            )
        return None
    if skip_dims:
        return None
    if model_shape:
        return _compare(model, t.name, model_shape, dims, mbs, exact)
    if any(d != 1 for d in dims):
        return (
            f"unable to load model '{model}', scalar tensor '{t.name}', should only provide 1 in "
            "the model configuration when the model doesn't support batching. Model configuration "
            f"provided: {_s(dims)}."
        )
    return None
