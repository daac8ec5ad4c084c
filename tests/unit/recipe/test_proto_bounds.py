"""Recipe integer bounds come from the ModelConfig proto field each value is written to (Triton's schema as
tritonclient ships it), not from our own literals."""

from __future__ import annotations

import pytest
from google.protobuf.descriptor import FieldDescriptor as FD
from tritonclient.grpc import model_config_pb2 as pb2

from tritonbuild.recipe import models as rm

RANGES = {
    FD.TYPE_INT32: rm.INT32_MAX,
    FD.TYPE_INT64: rm.INT64_MAX,
    FD.TYPE_UINT32: rm.UINT32_MAX,
    FD.TYPE_UINT64: rm.UINT64_MAX,
}

# recipe model, field → (proto message, proto field) it is rendered into (repository/config.py)
MAPPING = [
    (rm.Recipe, "max_batch_size", pb2.ModelConfig, "max_batch_size"),
    (rm.Batching, "max_queue_delay_us", pb2.ModelDynamicBatching, "max_queue_delay_microseconds"),
    (rm.Batching, "preferred_batch_sizes", pb2.ModelDynamicBatching, "preferred_batch_size"),
    (rm.Batching, "priority_levels", pb2.ModelDynamicBatching, "priority_levels"),
    (rm.Batching, "default_priority_level", pb2.ModelDynamicBatching, "default_priority_level"),
    (rm.QueuePolicy, "default_timeout_us", pb2.ModelQueuePolicy, "default_timeout_microseconds"),
    (rm.QueuePolicy, "max_queue_size", pb2.ModelQueuePolicy, "max_queue_size"),
    (rm.InstanceGroup, "count", pb2.ModelInstanceGroup, "count"),
    (rm.InstanceGroup, "gpus", pb2.ModelInstanceGroup, "gpus"),
    (rm.VersionPolicy, "latest", pb2.ModelVersionPolicy.Latest, "num_versions"),
    (rm.VersionPolicy, "specific", pb2.ModelVersionPolicy.Specific, "versions"),
    (rm.Recipe, "version", pb2.ModelVersionPolicy.Specific, "versions"),
    (rm.TensorSpec, "dims", pb2.ModelInput, "dims"),
    (rm.Warmup, "batch_size", pb2.ModelWarmup, "batch_size"),
    (rm.Warmup, "count", pb2.ModelWarmup, "count"),
]


def _le(model, field: str):
    info = model.model_fields[field]
    metas = list(info.metadata)
    ann = info.annotation
    for arg in getattr(ann, "__args__", ()):  # list[Annotated[int, Field(le=...)]] or int | None
        for inner in (*getattr(arg, "__args__", ()), arg):
            metas += list(getattr(inner, "__metadata__", ()))
    for m in metas:
        for sub in getattr(m, "metadata", [m]):
            if getattr(sub, "le", None) is not None:
                return sub.le
    return None


@pytest.mark.parametrize(
    "model,field,message,proto_field", MAPPING, ids=lambda x: getattr(x, "__name__", x)
)
def test_upper_bound_is_the_proto_type_range(model, field, message, proto_field):
    ftype = message.DESCRIPTOR.fields_by_name[proto_field].type
    assert _le(model, field) == RANGES[ftype]
