"""config.pbtxt as a ModelConfig proto, printed with text_format and parsed back: never string-templated."""

from __future__ import annotations

from google.protobuf import text_format

from tritonbuild.recipe.models import DTYPES, Recipe, TensorSpec

KINDS = {"cpu": "KIND_CPU", "gpu": "KIND_GPU", "auto": "KIND_AUTO", "model": "KIND_MODEL"}


def model_config_pb2():
    """Triton's ModelConfig messages and enums (from tritonclient's schema, any protobuf >= 4.21)."""
    from tritonbuild.core.triton_proto import model_config_pb2 as schema

    return schema()


def add_tensors(field, specs: list[TensorSpec], pb2, is_input: bool) -> None:
    """Append ModelInput/ModelOutput entries for specs (optional is an input-only field)."""
    for s in specs:
        t = field.add()
        t.name = s.name
        t.data_type = pb2.DataType.Value(DTYPES[s.dtype])
        t.dims.extend(s.dims)
        if is_input and s.optional:
            t.optional = True


def build_model_config(recipe: Recipe, inputs: list[TensorSpec], outputs: list[TensorSpec], backend):
    pb2 = model_config_pb2()
    mc = pb2.ModelConfig()
    mc.name = recipe.name
    mc.max_batch_size = recipe.max_batch_size
    add_tensors(mc.input, inputs, pb2, True)
    add_tensors(mc.output, outputs, pb2, False)
    vp = recipe.version_policy
    if vp is None or vp.latest is not None:
        mc.version_policy.latest.num_versions = vp.latest if vp else 1
    elif vp.specific is not None:
        mc.version_policy.specific.versions.extend(vp.specific)
    else:
        mc.version_policy.all.SetInParent()
    for g in recipe.instances:
        ig = mc.instance_group.add()
        ig.kind = pb2.ModelInstanceGroup.Kind.Value(KINDS[g.kind])
        ig.count = g.count
        ig.gpus.extend(g.gpus)
    if recipe.batching is not None:
        _batching(mc.dynamic_batching, recipe.batching, pb2)
    for k in sorted(recipe.parameters):
        mc.parameters[k].string_value = recipe.parameters[k]
    filename = backend.default_filename(recipe)
    if filename:
        mc.default_model_filename = filename
    backend.configure(mc, recipe)  # last: it may refine what the generic fields set (e.g. TensorRT profiles)
    if getattr(recipe, "accelerators", None) is not None:
        ea = mc.optimization.execution_accelerators
        for acc in recipe.accelerators.gpu:
            a = ea.gpu_execution_accelerator.add()
            a.name = acc.name
            for k, v in sorted(acc.model_dump(exclude={"name"}, exclude_none=True).items()):
                a.parameters[k] = ("true" if v else "false") if isinstance(v, bool) else str(v)
        for acc in recipe.accelerators.cpu:
            ea.cpu_execution_accelerator.add().name = acc.name
    if recipe.warmup is not None:
        add_warmup(mc, recipe.warmup, inputs, recipe.verify.dynamic_size, pb2)
    return mc


def add_warmup(mc, warmup, inputs: list[TensorSpec], dynamic_size: int, pb2, files: dict | None = None) -> None:
    """model_warmup: one sample; -1 dims become dynamic_size (or the golden sample's shape via files)."""
    mc.ClearField("model_warmup")
    w = mc.model_warmup.add()
    w.name = f"{warmup.data}_sample"
    w.batch_size = warmup.batch_size
    w.count = warmup.count
    for t in inputs:
        wi = w.inputs[t.name]
        wi.data_type = pb2.DataType.Value(DTYPES[t.dtype])
        if files is not None:
            dims, filename = files[t.name]
            wi.dims.extend(dims)
            wi.input_data_file = filename
        else:
            wi.dims.extend(dynamic_size if d == -1 else d for d in t.dims)
            if warmup.data == "random":
                wi.random_data = True
            else:
                wi.zero_data = True


def _queue_policy(qp, policy, pb2) -> None:
    qp.timeout_action = pb2.ModelQueuePolicy.TimeoutAction.Value(policy.timeout_action.upper())
    qp.default_timeout_microseconds = policy.default_timeout_us
    qp.allow_timeout_override = policy.allow_timeout_override
    qp.max_queue_size = policy.max_queue_size


def _batching(db, b, pb2) -> None:
    db.SetInParent()
    db.preferred_batch_size.extend(b.preferred_batch_sizes)
    db.max_queue_delay_microseconds = b.max_queue_delay_us
    db.preserve_ordering = b.preserve_ordering
    db.priority_levels = b.priority_levels
    db.default_priority_level = b.default_priority_level
    if b.default_queue_policy is not None:
        _queue_policy(db.default_queue_policy, b.default_queue_policy, pb2)
    for level in sorted(b.priority_queue_policy):
        _queue_policy(db.priority_queue_policy[level], b.priority_queue_policy[level], pb2)


def render(mc) -> bytes:
    """text_format in field order; max_batch_size is written even when 0 (proto3 would drop it)."""
    text = text_format.MessageToString(mc)
    if mc.max_batch_size == 0:
        lines = text.splitlines(keepends=True)
        at = next((i for i, line in enumerate(lines) if line.startswith(("input", "output", "version_policy"))),
                  len(lines))
        lines.insert(at, "max_batch_size: 0\n")
        text = "".join(lines)
    data = text.encode()
    if parse(data) != mc:
        raise AssertionError("config.pbtxt does not parse back to the same ModelConfig")
    return data


def parse(data: bytes):
    """Parse config.pbtxt text as Triton's ModelConfig; raises text_format.ParseError with line:col."""
    mc = model_config_pb2().ModelConfig()
    text_format.Parse(data.decode(), mc)
    return mc
