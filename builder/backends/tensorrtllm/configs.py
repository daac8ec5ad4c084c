"""ModelConfig protos for the TensorRT-LLM model group. Every parameter is set from the recipe and the
engine's config.json; nothing is a placeholder."""

from __future__ import annotations

from dataclasses import dataclass

from tritonbuild.recipe.llm import LLMRecipe
from tritonbuild.triton.config import model_config_pb2


@dataclass(frozen=True)
class Names:
    ensemble: str
    preprocessing: str
    tensorrt_llm: str
    postprocessing: str
    bls: str

    @classmethod
    def of(cls, name: str) -> Names:
        return cls(ensemble=name, preprocessing=f"{name}_preprocessing", tensorrt_llm=f"{name}_tensorrt_llm",
                   postprocessing=f"{name}_postprocessing", bls=f"{name}_bls")


LOGITS_TYPE = {"float32": "TYPE_FP32", "float16": "TYPE_FP16"}


def _tensor(field, pb2, name, dtype, dims, *, optional=False, reshape=None, ragged=False):
    t = field.add()
    t.name = name
    t.data_type = pb2.DataType.Value(dtype)
    t.dims.extend(dims)
    if optional:
        t.optional = True
    if reshape is not None:
        t.reshape.SetInParent()
        t.reshape.shape.extend(reshape)
    if ragged:
        t.allow_ragged_batch = True
    return t


def _base(pb2, name: str, max_batch_size: int, *, backend: str = "", platform: str = ""):
    mc = pb2.ModelConfig()
    mc.name = name
    if backend:
        mc.backend = backend
    if platform:
        mc.platform = platform
    mc.max_batch_size = max_batch_size
    mc.version_policy.latest.num_versions = 1
    return mc


def _params(mc, values: dict[str, object]) -> None:
    for key in sorted(values):
        v = values[key]
        mc.parameters[key].string_value = ("true" if v else "false") if isinstance(v, bool) else str(v)


def _instances(mc, pb2, count: int) -> None:
    g = mc.instance_group.add()
    g.kind = pb2.ModelInstanceGroup.Kind.Value("KIND_CPU")
    g.count = count


def preprocessing(r: LLMRecipe, names: Names, mbs: int, end_id: int, pad_id: int):
    pb2 = model_config_pb2()
    mc = _base(pb2, names.preprocessing, mbs, backend="python")
    _tensor(mc.input, pb2, "text_input", "TYPE_STRING", [1])
    _tensor(mc.input, pb2, "max_tokens", "TYPE_INT32", [1])
    _tensor(mc.output, pb2, "input_ids", "TYPE_INT32", [-1])
    _tensor(mc.output, pb2, "input_lengths", "TYPE_INT32", [1])
    _tensor(mc.output, pb2, "request_output_len", "TYPE_INT32", [1])
    _tensor(mc.output, pb2, "end_id", "TYPE_INT32", [1])
    _tensor(mc.output, pb2, "pad_id", "TYPE_INT32", [1])
    _instances(mc, pb2, r.serving.instances.preprocessing)
    _params(mc, {"tokenizer_file": "tokenizer/tokenizer.json", "add_special_tokens": False, "end_id": end_id,
                 "pad_id": pad_id})
    mc.default_model_filename = "model.py"
    return mc


def postprocessing(r: LLMRecipe, names: Names, mbs: int):
    pb2 = model_config_pb2()
    mc = _base(pb2, names.postprocessing, mbs, backend="python")
    _tensor(mc.input, pb2, "tokens_batch", "TYPE_INT32", [-1, -1])
    _tensor(mc.input, pb2, "sequence_length", "TYPE_INT32", [-1])
    _tensor(mc.output, pb2, "output", "TYPE_STRING", [-1])
    _instances(mc, pb2, r.serving.instances.postprocessing)
    _params(mc, {"tokenizer_file": "tokenizer/tokenizer.json", "skip_special_tokens": True})
    mc.default_model_filename = "model.py"
    return mc


def tensorrt_llm(r: LLMRecipe, names: Names, engine: dict, engine_path: str):
    """The tensorrtllm C++ backend model; limits come from the engine, runtime knobs from the recipe."""
    pb2 = model_config_pb2()
    bc = engine["build_config"]
    mbs = int(bc["max_batch_size"])
    mc = _base(pb2, names.tensorrt_llm, mbs, backend="tensorrtllm")
    mc.model_transaction_policy.decoupled = r.serving.streaming
    db = mc.dynamic_batching
    db.preferred_batch_size.append(mbs)
    db.max_queue_delay_microseconds = r.serving.max_queue_delay_us
    db.default_queue_policy.max_queue_size = r.serving.max_queue_size
    _tensor(mc.input, pb2, "input_ids", "TYPE_INT32", [-1], ragged=True)
    _tensor(mc.input, pb2, "input_lengths", "TYPE_INT32", [1], reshape=[])
    _tensor(mc.input, pb2, "request_output_len", "TYPE_INT32", [1], reshape=[])
    _tensor(mc.input, pb2, "end_id", "TYPE_INT32", [1], reshape=[], optional=True)
    _tensor(mc.input, pb2, "pad_id", "TYPE_INT32", [1], reshape=[], optional=True)
    _tensor(mc.input, pb2, "streaming", "TYPE_BOOL", [1], reshape=[], optional=True)
    _tensor(mc.input, pb2, "beam_width", "TYPE_INT32", [1], reshape=[], optional=True)
    _tensor(mc.input, pb2, "temperature", "TYPE_FP32", [1], reshape=[], optional=True)
    _tensor(mc.input, pb2, "runtime_top_k", "TYPE_INT32", [1], reshape=[], optional=True)
    _tensor(mc.input, pb2, "runtime_top_p", "TYPE_FP32", [1], reshape=[], optional=True)
    _tensor(mc.output, pb2, "output_ids", "TYPE_INT32", [-1, -1])
    _tensor(mc.output, pb2, "sequence_length", "TYPE_INT32", [-1])
    logits = LOGITS_TYPE[engine["pretrained_config"].get("logits_dtype", "float32")]
    _tensor(mc.output, pb2, "context_logits", logits, [-1, -1])
    _tensor(mc.output, pb2, "generation_logits", logits, [-1, -1, -1])
    # NOTE: the C++ backend manages its GPUs itself (gpu_device_ids); Triton's instance kind stays CPU.
    _instances(mc, pb2, 1)
    kv, s = r.kv_cache, r.serving
    params: dict[str, object] = {
        "gpt_model_type": s.batching_strategy, "gpt_model_path": engine_path,
        "max_beam_width": r.engine.max_beam_width, "batch_scheduler_policy": s.scheduler_policy,
        "kv_cache_free_gpu_mem_fraction": kv.free_gpu_mem_fraction, "enable_kv_cache_reuse": kv.enable_block_reuse,
        "max_attention_window_size": int(bc["max_seq_len"]), "exclude_input_in_output": s.exclude_input_in_output,
        "enable_chunked_context": s.enable_chunked_context, "normalize_log_probs": True,
        "FORCE_CPU_ONLY_INPUT_TENSORS": "no", "decoupled_mode": s.streaming,
    }
    if kv.max_tokens is not None:
        params["max_tokens_in_paged_kv_cache"] = kv.max_tokens
    world = r.engine.tp_size * r.engine.pp_size
    ids = s.gpu_device_ids
    params["gpu_device_ids"] = ";".join(",".join(map(str, ids[i:i + world])) for i in range(0, len(ids), world))
    _params(mc, params)
    return mc


def ensemble(r: LLMRecipe, names: Names, mbs: int):
    pb2 = model_config_pb2()
    mc = _base(pb2, names.ensemble, mbs, platform="ensemble")
    _tensor(mc.input, pb2, "text_input", "TYPE_STRING", [1])
    _tensor(mc.input, pb2, "max_tokens", "TYPE_INT32", [1])
    _tensor(mc.output, pb2, "text_output", "TYPE_STRING", [-1])
    steps = [
        (names.preprocessing, {"text_input": "text_input", "max_tokens": "max_tokens"},
         {"input_ids": "_INPUT_ID", "input_lengths": "_INPUT_LEN", "request_output_len": "_REQUEST_OUTPUT_LEN",
          "end_id": "_END_ID", "pad_id": "_PAD_ID"}),
        (names.tensorrt_llm, {"input_ids": "_INPUT_ID", "input_lengths": "_INPUT_LEN",
                              "request_output_len": "_REQUEST_OUTPUT_LEN", "end_id": "_END_ID", "pad_id": "_PAD_ID"},
         {"output_ids": "_TOKENS_BATCH", "sequence_length": "_SEQUENCE_LENGTH"}),
        (names.postprocessing, {"tokens_batch": "_TOKENS_BATCH", "sequence_length": "_SEQUENCE_LENGTH"},
         {"output": "text_output"}),
    ]
    for model, inputs, outputs in steps:
        step = mc.ensemble_scheduling.step.add()
        step.model_name = model
        step.model_version = -1  # NOTE: the proto3 default 0 would demand version 0 (server#5474)
        for k in sorted(inputs):
            step.input_map[k] = inputs[k]
        for k in sorted(outputs):
            step.output_map[k] = outputs[k]
    return mc


def bls(r: LLMRecipe, names: Names, mbs: int):
    pb2 = model_config_pb2()
    mc = _base(pb2, names.bls, mbs, backend="python")
    mc.model_transaction_policy.decoupled = r.serving.streaming
    _tensor(mc.input, pb2, "text_input", "TYPE_STRING", [1])
    _tensor(mc.input, pb2, "max_tokens", "TYPE_INT32", [1])
    _tensor(mc.output, pb2, "text_output", "TYPE_STRING", [-1])
    _instances(mc, pb2, r.serving.instances.bls)
    _params(mc, {"preprocessing_model": names.preprocessing, "llm_model": names.tensorrt_llm,
                 "postprocessing_model": names.postprocessing})
    mc.default_model_filename = "model.py"
    return mc
