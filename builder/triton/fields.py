"""The ModelConfig fields the serving Triton can read: a config that uses a newer field fails to
parse there.

tritonclient 2.73 ships a newer ModelConfig proto than the tritonserver 2.51 (r24.10) we target;
e.g. `model_metrics` and `ensemble_scheduling.max_inflight_requests` parse with ours and make 2.51
refuse the config. Recorded from triton-inference-server/common, commit
578491fc3944f77d16a6a38e3d7691c485c47ba0 (branch r24.10), protobuf/model_config.proto: message
(nested names joined by ".") → its field names.
"""

from __future__ import annotations

TRITON_VERSION = "2.51.0"
SOURCE = (
    "triton-inference-server/common",
    "578491fc3944f77d16a6a38e3d7691c485c47ba0",
    "protobuf/model_config.proto",
)

FIELDS: dict[str, frozenset[str]] = {
    "BatchInput": frozenset({"data_type", "kind", "source_input", "target_name"}),
    "BatchOutput": frozenset({"kind", "source_input", "target_name"}),
    "ModelConfig": frozenset(
        {
            "backend",
            "batch_input",
            "batch_output",
            "cc_model_filenames",
            "default_model_filename",
            "dynamic_batching",
            "ensemble_scheduling",
            "input",
            "instance_group",
            "max_batch_size",
            "metric_tags",
            "model_operations",
            "model_repository_agents",
            "model_transaction_policy",
            "model_warmup",
            "name",
            "optimization",
            "output",
            "parameters",
            "platform",
            "response_cache",
            "runtime",
            "sequence_batching",
            "version_policy",
        }
    ),
    "ModelDynamicBatching": frozenset(
        {
            "default_priority_level",
            "default_queue_policy",
            "max_queue_delay_microseconds",
            "preferred_batch_size",
            "preserve_ordering",
            "priority_levels",
            "priority_queue_policy",
        }
    ),
    "ModelEnsembling": frozenset({"step"}),
    "ModelEnsembling.Step": frozenset(
        {"input_map", "model_name", "model_namespace", "model_version", "output_map"}
    ),
    "ModelInput": frozenset(
        {
            "allow_ragged_batch",
            "data_type",
            "dims",
            "format",
            "is_non_linear_format_io",
            "is_shape_tensor",
            "name",
            "optional",
            "reshape",
        }
    ),
    "ModelInstanceGroup": frozenset(
        {
            "count",
            "gpus",
            "host_policy",
            "kind",
            "name",
            "passive",
            "profile",
            "rate_limiter",
            "secondary_devices",
        }
    ),
    "ModelInstanceGroup.SecondaryDevice": frozenset({"device_id", "kind"}),
    "ModelOperations": frozenset({"op_library_filename"}),
    "ModelOptimizationPolicy": frozenset(
        {
            "cuda",
            "eager_batching",
            "execution_accelerators",
            "gather_kernel_buffer_threshold",
            "graph",
            "input_pinned_memory",
            "output_pinned_memory",
            "priority",
        }
    ),
    "ModelOptimizationPolicy.Cuda": frozenset(
        {"busy_wait_events", "graph_spec", "graphs", "output_copy_stream"}
    ),
    "ModelOptimizationPolicy.Cuda.GraphSpec": frozenset(
        {"batch_size", "graph_lower_bound", "input"}
    ),
    "ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound": frozenset({"batch_size", "input"}),
    "ModelOptimizationPolicy.Cuda.GraphSpec.Shape": frozenset({"dim"}),
    "ModelOptimizationPolicy.ExecutionAccelerators": frozenset(
        {"cpu_execution_accelerator", "gpu_execution_accelerator"}
    ),
    "ModelOptimizationPolicy.ExecutionAccelerators.Accelerator": frozenset({"name", "parameters"}),
    "ModelOptimizationPolicy.Graph": frozenset({"level"}),
    "ModelOptimizationPolicy.PinnedMemoryBuffer": frozenset({"enable"}),
    "ModelOutput": frozenset(
        {
            "data_type",
            "dims",
            "is_non_linear_format_io",
            "is_shape_tensor",
            "label_filename",
            "name",
            "reshape",
        }
    ),
    "ModelParameter": frozenset({"string_value"}),
    "ModelQueuePolicy": frozenset(
        {
            "allow_timeout_override",
            "default_timeout_microseconds",
            "max_queue_size",
            "timeout_action",
        }
    ),
    "ModelRateLimiter": frozenset({"priority", "resources"}),
    "ModelRateLimiter.Resource": frozenset({"count", "global", "name"}),
    "ModelRepositoryAgents": frozenset({"agents"}),
    "ModelRepositoryAgents.Agent": frozenset({"name", "parameters"}),
    "ModelResponseCache": frozenset({"enable"}),
    "ModelSequenceBatching": frozenset(
        {
            "control_input",
            "direct",
            "iterative_sequence",
            "max_sequence_idle_microseconds",
            "oldest",
            "state",
        }
    ),
    "ModelSequenceBatching.Control": frozenset(
        {"bool_false_true", "data_type", "fp32_false_true", "int32_false_true", "kind"}
    ),
    "ModelSequenceBatching.ControlInput": frozenset({"control", "name"}),
    "ModelSequenceBatching.InitialState": frozenset(
        {"data_file", "data_type", "dims", "name", "zero_data"}
    ),
    "ModelSequenceBatching.State": frozenset(
        {
            "data_type",
            "dims",
            "initial_state",
            "input_name",
            "output_name",
            "use_growable_memory",
            "use_same_buffer_for_input_output",
        }
    ),
    "ModelSequenceBatching.StrategyDirect": frozenset(
        {"max_queue_delay_microseconds", "minimum_slot_utilization"}
    ),
    "ModelSequenceBatching.StrategyOldest": frozenset(
        {
            "max_candidate_sequences",
            "max_queue_delay_microseconds",
            "preferred_batch_size",
            "preserve_ordering",
        }
    ),
    "ModelTensorReshape": frozenset({"shape"}),
    "ModelTransactionPolicy": frozenset({"decoupled"}),
    "ModelVersionPolicy": frozenset({"all", "latest", "specific"}),
    "ModelVersionPolicy.All": frozenset(),
    "ModelVersionPolicy.Latest": frozenset({"num_versions"}),
    "ModelVersionPolicy.Specific": frozenset({"versions"}),
    "ModelWarmup": frozenset({"batch_size", "count", "inputs", "name"}),
    "ModelWarmup.Input": frozenset(
        {"data_type", "dims", "input_data_file", "random_data", "zero_data"}
    ),
}


def _repeated(field) -> bool:
    # NOTE: FieldDescriptor.is_repeated exists from protobuf 6.x (where .label is deprecated); the
    # protobuf 4/5 runtimes we support (pyproject: protobuf>=4.25) only have .label.
    flag = getattr(field, "is_repeated", None)
    return bool(flag) if flag is not None else field.label == field.LABEL_REPEATED


def unknown_fields(message, prefix: str = "") -> list[str]:
    """Set fields of a parsed ModelConfig (any nested message) that Triton 2.51's proto does not
    have."""
    out = []
    key = message.DESCRIPTOR.full_name.removeprefix("inference.")
    known = FIELDS.get(key)
    for field, value in message.ListFields():
        path = f"{prefix}{field.name}"
        if known is None or field.name not in known:
            out.append(path)
            continue
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].message_type is not None:
                for k, v in value.items():
                    out.extend(unknown_fields(v, f"{path}[{k}]."))
        elif _repeated(field):
            for i, v in enumerate(value):
                out.extend(unknown_fields(v, f"{path}[{i}]."))
        else:
            out.extend(unknown_fields(value, f"{path}."))
    return out
