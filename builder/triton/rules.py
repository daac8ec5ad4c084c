"""Triton's own config validation, ported rule for rule, for when no server can run.

Source: triton-inference-server/core, commit bfec7c61dc0939433f64f14e89b1973073eac8ba (branch r24.10
= tritonserver 2.51): src/model_config_utils.cc (AutoCompleteBackendFields, ValidateModelConfig,
ValidateInstanceGroup, the sequence-control getters; ValidateModelIOConfig, ValidateIOShape and
ValidateBatchIO are io_rules.py's), src/model_repository_manager/model_repository_manager.cc
(directory name); the ensemble rules are in ensemble_rules.py. Messages are Triton's own wording, so
a static finding reads like the server's refusal. Triton stops at the first failure of a model;
these functions report every one they find. What they cannot see: GPU ids (the serving machine's
GPUs), what a backend autocompletes from the model file, the backend's own checks.
"""

from __future__ import annotations

import re
from pathlib import Path

from tritonbuild.triton.config import enum_name, parse
from tritonbuild.triton.ensemble_rules import ensemble_scheduling_problems
from tritonbuild.triton.fields import TRITON_VERSION, unknown_fields
from tritonbuild.triton.io_rules import io_problems
from tritonbuild.triton.model_dir import VERSION_RE as VERSION_RE  # where it was

# GetBackendTypeFromPlatform. torch_aoti (AOTInductor packages) pairs with pytorch from core dabbddc
# (r26.03, "Add Support for Torch AOTI"); 2.51 does not know it: such models target a newer server,
# as tritonbuild writes them.
LEGACY = {
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "tensorrt_plan": "tensorrt",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "torch_aoti": "pytorch",
}
KNOWN_BACKENDS = {
    "tensorflow",
    "tensorrt",
    "onnxruntime",
    "pytorch",
}  # GetBackendType; others are UNKNOWN
# AutoCompleteBackendFields names the model file of the TensorFlow platforms itself
# (kTensorFlow*Filename)
CORE_DEFAULT_FILES = {
    "tensorflow_graphdef": "model.graphdef",
    "tensorflow_savedmodel": "model.savedmodel",
}


def _backend_after_autofill(mc, model_dir: Path) -> tuple[str, str, list[str]]:
    """AutoCompleteBackendFields: (backend, platform) as Triton completes them, and its refusal if
    any."""
    backend, platform, dmf = mc.backend, mc.platform, mc.default_model_filename
    versions = (
        sorted(entry for entry in model_dir.iterdir() if entry.is_dir())
        if model_dir.is_dir()
        else []
    )
    content = {entry.name: entry for entry in versions[0].iterdir()} if versions else {}

    def has_file(name: str) -> bool:
        return not platform and not dmf and name in content and not content[name].is_dir()

    if platform in ("tensorflow_graphdef", "tensorflow_savedmodel"):
        return backend or "tensorflow", platform, []
    if not backend:
        if platform == "tensorrt_plan" or dmf == "model.plan" or has_file("model.plan"):
            backend = "tensorrt"
        elif (
            platform == "onnxruntime_onnx"
            or dmf == "model.onnx"
            or (not platform and not dmf and "model.onnx" in content)
        ):
            backend = "onnxruntime"
        elif dmf == "model.xml" or (not platform and not dmf and "model.xml" in content):
            backend = "openvino"
        elif platform == "pytorch_libtorch" or dmf == "model.pt" or has_file("model.pt"):
            backend = "pytorch"
        elif dmf == "model.py" or (not platform and not dmf and "model.py" in content):
            backend = "python"
    if backend in ("tensorrt", "onnxruntime", "pytorch") and not platform:
        platform = {
            "tensorrt": "tensorrt_plan",
            "onnxruntime": "onnxruntime_onnx",
            "pytorch": "pytorch_libtorch",
        }[backend]
    if not backend and not platform and not dmf:
        name = model_dir.name
        if "." not in name:
            return (
                "",
                platform,
                [
                    f"Invalid model name: Could not determine backend for model '{name}' with no "
                    "backend in model configuration. Expected model name of the form "
                    "'model.<backend_name>'."
                ],
            )
        backend = name.split(".", 1)[1]
    return backend, platform, []


def backend_after_autofill(mc, model_dir: Path) -> str:
    """The backend Triton's AutoCompleteBackendFields settles on for this config ('' when it
    cannot)."""
    return _backend_after_autofill(mc, model_dir)[0]


# model_config_utils.cc SetDefaultInstanceCount (core r24.10, lines 990-1008): a group without a
# count gets 1, but 2 for a KIND_CPU group of these backends
# (tests/contracts/facts/triton_instance_groups.json)
DEFAULT_CPU_INSTANCES = {"tensorflow": 2, "onnxruntime": 2}


def default_instance_count(kind: str, backend: str) -> int | None:
    """The count Triton gives an instance group of kind ('KIND_CPU' ...) that sets none, for a
    config whose backend (after autofill) is backend; None for KIND_AUTO when it depends on whether
    the server sees a GPU."""
    cpu = DEFAULT_CPU_INSTANCES.get(backend, 1)
    if kind == "KIND_AUTO" and cpu != 1:
        return None
    return cpu if kind == "KIND_CPU" else 1


def autocompleted_backend(model_dir: Path) -> tuple[str, list[str]]:
    """A model directory without config.pbtxt: the backend Triton's AutoCompleteBackendFields finds
    from the first version directory's files (model.plan, model.onnx, model.xml, model.pt, model.py,
    a TensorFlow model), or its refusal."""
    backend, _platform, problems = _backend_after_autofill(parse(b""), model_dir)
    versions = sorted(
        entry for entry in model_dir.iterdir() if entry.is_dir() and entry.name.isdigit()
    )
    if not backend and versions:
        for platform_name, filename in CORE_DEFAULT_FILES.items():
            if (versions[0] / filename).exists():
                return LEGACY[platform_name], []
    if not versions:
        return "", [
            "no config.pbtxt and no version directory: Triton cannot autocomplete the config"
        ]
    return backend, problems


NAME_MISMATCH = "unexpected directory name "  # model_repository_manager.cc


def model_problems(mc, model_dir: Path) -> list[str]:
    """Triton's poll- and load-time checks of one model's config (not the ensemble-vs-steps
    ones)."""
    name = mc.name or model_dir.name
    problems: list[str] = []
    newer = unknown_fields(mc)
    if newer:
        problems.append(
            f"failed to read text proto: {', '.join(newer)} is not a field of tritonserver "
            f"{TRITON_VERSION}'s ModelConfig (tritonclient's newer proto accepts it; the server "
            "does not)"
        )
    if mc.name and mc.name != model_dir.name:
        problems.append(
            f"{NAME_MISMATCH}'{model_dir.name}' for model '{mc.name}', directory name must equal "
            "model name"
        )
    backend, platform, fill = _backend_after_autofill(mc, model_dir)
    problems += fill
    ensemble = platform == "ensemble"
    if not fill:
        if not backend and not ensemble:
            problems.append(f"unexpected platform type '{platform}' for {name}")
        elif backend and ensemble:
            problems.append(
                f"Ensemble model '{name}' must have platform type '{platform}' and empty backend "
                "type"
            )
        elif backend in KNOWN_BACKENDS and LEGACY.get(platform) != backend:
            problems.append(f"unexpected 'platform' and 'backend' pair, got:{platform}, {backend}")
    if mc.max_batch_size < 0:
        problems.append(f"'max_batch_size' must be non-negative value for {name}")
    if mc.HasField("dynamic_batching"):
        problems += _dynamic_batching(mc, name)
    if mc.HasField("sequence_batching"):
        problems += _sequence_batching(mc, name)
    if mc.HasField("ensemble_scheduling"):
        problems += ensemble_scheduling_problems(mc, name, platform)
    elif ensemble:
        problems.append(
            f"ensemble scheduling must be set for ensemble {name} whose platform is ensemble"
        )
    if mc.model_transaction_policy.decoupled and mc.response_cache.enable:
        problems.append(
            f"Response Cache does not currently support model {name} with 'decoupled' transaction "
            "policy. Please disable the response cache."
        )
    if not mc.HasField("ensemble_scheduling"):
        problems += _instance_groups(mc, name, platform)
    problems += io_problems(mc, name, platform)
    return problems


def _dynamic_batching(mc, name: str) -> list[str]:
    problems, db = [], mc.dynamic_batching
    for size in db.preferred_batch_size:
        if size <= 0:
            problems.append(f"dynamic batching preferred size must be positive for {name}")
        elif size > mc.max_batch_size:
            problems.append(f"dynamic batching preferred size must be <= max batch size for {name}")
    levels = db.priority_levels
    if levels:
        if db.default_priority_level == 0 or db.default_priority_level > levels:
            problems.append(f"default priority level must be in range [1, {levels}] for {name}")
        for key in db.priority_queue_policy:
            if key == 0 or key > levels:
                problems.append(
                    f"priority queue policy must have priority level in range [1, {levels}] for "
                    f"{name}"
                )
    if db.preserve_ordering:
        if levels > 1:
            problems.append(
                f"Only one priority level is allowed when 'preserve_ordering' is true for {name}"
            )
        delay = type(db.default_queue_policy).DELAY
        policies = [db.default_queue_policy, *db.priority_queue_policy.values()]
        if any(q.default_timeout_microseconds != 0 and q.timeout_action == delay for q in policies):
            problems.append(
                "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is "
                f"true for {name}"
            )
    return problems


def _sequence_batching(mc, name: str) -> list[str]:
    problems, sb = [], mc.sequence_batching
    if mc.response_cache.enable:
        problems.append(
            f"Response Cache does not currently support model {name} with sequence batching "
            "scheduler. Please disable the response cache."
        )
    kind = type(sb).Control.Kind
    for k in (
        "CONTROL_SEQUENCE_START",
        "CONTROL_SEQUENCE_END",
        "CONTROL_SEQUENCE_READY",
        "CONTROL_SEQUENCE_CORRID",
    ):
        err = _control(sb, name, kind.Value(k), k)
        if err:
            problems.append(err)
            return problems
    if sb.HasField("oldest"):
        for size in sb.oldest.preferred_batch_size:
            if size <= 0:
                problems.append(
                    f"sequence batching preferred batch size must be positive for {name}"
                )
            elif size > mc.max_batch_size:
                problems.append(
                    f"sequence batching preferred batch size must be <= max batch size for {name}"
                )
    if sb.HasField("direct") and not 0.0 <= sb.direct.minimum_slot_utilization <= 1.0:
        problems.append(
            f"sequence batching minimum slot utilization must be in range (0.0, 1.0] for {name}"
        )
    return problems


def _control(sb, name: str, kind: int, kname: str) -> str | None:
    """GetBooleanSequenceControlProperties / GetTypedSequenceControlProperties for one control
    kind."""
    seen_tensors, found, dtype = set(), False, 0
    typed = kname == "CONTROL_SEQUENCE_CORRID"
    for ci in sb.control_input:
        if not ci.name:
            return f"sequence batching control tensor must have a name for {name}"
        if ci.name in seen_tensors:
            return f"sequence batching control tensor '{ci.name}' is specified for multiple control kinds for {name}"
        seen_tensors.add(ci.name)
        for c in ci.control:
            if c.kind != kind:
                continue
            if found:
                return f"sequence batching specifies multiple {kname} tensors for {name}"
            found = True
            given = [
                f
                for f in ("int32_false_true", "fp32_false_true", "bool_false_true")
                if len(getattr(c, f))
            ]
            if typed:
                dtype = c.data_type
                if given:
                    return (
                        "sequence batching must not specify either 'int32_false_true', "
                        f"'fp32_false_true' or 'bool_false_true' for {kname} for {name}"
                    )
                continue
            if not given:
                return (
                    "sequence batching must specify either 'int32_false_true', 'fp32_false_true' "
                    f"or 'bool_false_true' for {kname} for {name}"
                )
            if len(given) > 1:
                return (
                    "sequence batching specifies more than one from 'int32_false_true', "
                    f"'fp32_false_true' and 'bool_false_true' for {kname} for {name}"
                )
            if len(getattr(c, given[0])) != 2:
                return f"sequence batching control '{given[0]}' must have exactly 2 entries for {kname} for {name}"
    if typed and found:
        allowed = {"TYPE_UINT64", "TYPE_INT64", "TYPE_UINT32", "TYPE_INT32", "TYPE_STRING"}
        from tritonbuild.triton.config import model_config_pb2

        if model_config_pb2().DataType.Name(dtype) not in allowed:
            return (
                f"unexpected data type for control CONTROL_SEQUENCE_CORRID for {name}. Allowed "
                "data types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING"
            )
    return None


def _instance_groups(mc, name: str, platform: str) -> list[str]:
    problems = []
    for i, g in enumerate(mc.instance_group):
        gname = g.name or f"{name}_{i}"
        kind = enum_name(g, "kind", g.kind)
        if kind in ("KIND_MODEL", "KIND_CPU") and len(g.gpus):
            problems.append(
                f"instance group {gname} of model {name} has kind {kind} but specifies one or more "
                "GPUs"
            )
        if platform != "tensorrt_plan" and len(g.profile):
            problems.append(
                f"instance group {gname} of model {name} and platform {platform}specifies profile "
                "field which is only supported for TensorRT models"
            )
        elif len(g.profile):
            for prof in g.profile:
                if not prof:
                    problems.append("profile name must not be empty")
                    continue
                match = re.match(
                    r"\s*([+-]?\d+)", prof
                )  # std::stoi: leading integer, else invalid_argument
                if not match:
                    problems.append(f"unable to parse '{prof}': stoi")
                    continue
                if int(match.group(1)) < 0:
                    problems.append(
                        f"instance group {gname} of model {name} and platform {platform} specifies "
                        f"invalid profile {prof}. The field should contain the string "
                        "representation of a non-negative integer."
                    )
    return problems
