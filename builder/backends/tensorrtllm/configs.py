"""ModelConfig protos for the TensorRT-LLM model group. Every parameter is set from the recipe and the
engine's config.json; nothing is a placeholder. Tensor names, dtypes and shapes are upstream's
(tensorrtllm_backend inflight_batcher_llm templates, recorded in tests/contracts/facts): the ensemble and the
BLS take the optional inputs Triton's OpenAI frontend and genai-perf send."""

from __future__ import annotations

from dataclasses import dataclass

from tritonbuild.backends.tensorrtllm.recipe import LLMRecipe
from tritonbuild.backends.tensorrtllm.speculative import backend_params as speculative_params
from tritonbuild.triton.batching import write_dynamic_batching
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
        return cls(
            ensemble=name,
            preprocessing=f"{name}_preprocessing",
            tensorrt_llm=f"{name}_tensorrt_llm",
            postprocessing=f"{name}_postprocessing",
            bls=f"{name}_bls",
        )


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
        mc.parameters[key].string_value = (
            ("true" if v else "false") if isinstance(v, bool) else str(v)
        )


def _instances(mc, pb2, count: int) -> None:
    g = mc.instance_group.add()
    g.kind = pb2.ModelInstanceGroup.Kind.Value("KIND_CPU")
    g.count = count


# Optional request inputs of the ensemble and the BLS (upstream names, dtypes, dims), and the tensorrt_llm input
# each one feeds. The ensemble input is the key; None = handled by preprocessing (text → token ids).
REQUEST_INPUTS: list[tuple[str, str, list[int], str | None]] = [
    ("stream", "TYPE_BOOL", [1], "streaming"),
    ("end_id", "TYPE_INT32", [1], None),
    ("pad_id", "TYPE_INT32", [1], None),
    ("stop_words", "TYPE_STRING", [-1], None),
    ("bad_words", "TYPE_STRING", [-1], None),
    ("top_k", "TYPE_INT32", [1], "runtime_top_k"),
    ("top_p", "TYPE_FP32", [1], "runtime_top_p"),
    ("temperature", "TYPE_FP32", [1], "temperature"),
    ("length_penalty", "TYPE_FP32", [1], "len_penalty"),
    ("repetition_penalty", "TYPE_FP32", [1], "repetition_penalty"),
    ("min_tokens", "TYPE_INT32", [1], "min_tokens"),
    ("presence_penalty", "TYPE_FP32", [1], "presence_penalty"),
    ("frequency_penalty", "TYPE_FP32", [1], "frequency_penalty"),
    ("seed", "TYPE_UINT64", [1], "seed"),
    ("exclude_input_in_output", "TYPE_BOOL", [1], "exclude_input_in_output"),
    ("beam_width", "TYPE_INT32", [1], "beam_width"),
    ("num_return_sequences", "TYPE_INT32", [1], "num_return_sequences"),
    ("return_log_probs", "TYPE_BOOL", [1], "return_log_probs"),
    ("return_context_logits", "TYPE_BOOL", [1], "return_context_logits"),
    ("return_generation_logits", "TYPE_BOOL", [1], "return_generation_logits"),
    ("return_num_input_tokens", "TYPE_BOOL", [1], "return_num_input_tokens"),
    ("return_num_output_tokens", "TYPE_BOOL", [1], "return_num_output_tokens"),
    ("return_perf_metrics", "TYPE_BOOL", [1], "return_perf_metrics"),
    ("guided_decoding_guide_type", "TYPE_STRING", [1], "guided_decoding_guide_type"),
    ("guided_decoding_guide", "TYPE_STRING", [1], "guided_decoding_guide"),
]
# request inputs upstream's ensemble and tensorrt_llm templates (not its BLS) declare with allow_ragged_batch;
# they are the guide of guided decoding, declared only where the recipe turns it on (else a guided request is a
# 400 at the door instead of an error from a backend with no guided-decoding config)
RAGGED = GUIDE_INPUTS = ("guided_decoding_guide_type", "guided_decoding_guide")
# a LoRA's inputs, declared where the recipe has adapters (name, dtype, dims, ragged everywhere)
LORA_INPUTS = [
    ("lora_task_id", "TYPE_UINT64", [1], False),
    ("lora_weights", "TYPE_FP16", [-1, -1], True),
    ("lora_config", "TYPE_INT32", [-1, 3], True),
]
# Inputs a recorded client sends that upstream's templates lack, and the upstream input each one means:
# genai-perf --output-tokens-mean-deterministic sends min_length (tensorrtllm_converter.py). The ensemble routes
# min_tokens and min_length through preprocessing (a model input takes one source); the BLS forwards the first.
CLIENT_ALIASES = {"min_length": "min_tokens"}
# tensorrt_llm inputs fed by preprocessing (upstream: dims, optional, ragged)
TOKEN_INPUTS = [
    ("input_ids", "TYPE_INT32", [-1], True, None, True),
    ("input_lengths", "TYPE_INT32", [1], False, [], False),
    ("request_output_len", "TYPE_INT32", [1], False, [], False),
    ("end_id", "TYPE_INT32", [1], True, [], False),
    ("pad_id", "TYPE_INT32", [1], True, [], False),
    ("stop_words_list", "TYPE_INT32", [2, -1], True, None, True),
    ("bad_words_list", "TYPE_INT32", [2, -1], True, None, True),
]
# tensorrt_llm outputs passed straight to the ensemble's outputs (besides the tokens → text_output path)
PASSTHROUGH_OUTPUTS = [
    ("cum_log_probs", "TYPE_FP32", [-1]),
    ("output_log_probs", "TYPE_FP32", [-1, -1]),
    ("batch_index", "TYPE_INT32", [1]),
    ("sequence_index", "TYPE_INT32", [1]),
    ("num_input_tokens", "TYPE_INT32", [1]),
    ("num_output_tokens", "TYPE_INT32", [1]),
]
LOGITS_OUTPUTS = [("context_logits", [-1, -1]), ("generation_logits", [-1, -1, -1])]
# tensorrt_llm outputs returned when the request sets return_perf_metrics: KV-cache block counts, the request's
# timestamps, speculative-decoding acceptance; passed straight to the ensemble's and the BLS's outputs
PERF_OUTPUTS = [
    ("kv_cache_alloc_new_blocks", "TYPE_INT32", [1]),
    ("kv_cache_reused_blocks", "TYPE_INT32", [1]),
    ("kv_cache_alloc_total_blocks", "TYPE_INT32", [1]),
    ("arrival_time_ns", "TYPE_INT64", [1]),
    ("first_scheduled_time_ns", "TYPE_INT64", [1]),
    ("first_token_time_ns", "TYPE_INT64", [1]),
    ("last_token_time_ns", "TYPE_INT64", [1]),
    ("acceptance_rate", "TYPE_FP32", [1]),
    ("total_accepted_draft_tokens", "TYPE_INT32", [1]),
    ("total_draft_tokens", "TYPE_INT32", [1]),
]
# parameters the C++ backend reads outside any try block (model_instance_state.cc): a missing one fails the
# load with "Cannot find parameter with name: …"; "" = the feature (guided decoding) is off
UNGUARDED = (
    "gpt_model_type",
    "tokenizer_dir",
    "xgrammar_tokenizer_info_path",
    "guided_decoding_backend",
)
UNGUARDED_VALUES = {"gpt_model_type": ("V1", "v1", "inflight_batching", "inflight_fused_batching")}
# NOTE: upstream's BLS template (alone) reshapes these to scalars
BLS_SCALARS = (
    "return_log_probs",
    "return_context_logits",
    "return_generation_logits",
    "num_return_sequences",
    "return_perf_metrics",
    "lora_task_id",
)
UNGUARDED_EMPTY = ("tokenizer_dir", "xgrammar_tokenizer_info_path", "guided_decoding_backend")


XGRAMMAR_INFO = (
    "xgrammar_tokenizer_info.json"  # written next to the engine when guided decoding is on
)
EXECUTOR_WORKER = (
    "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker"  # upstream template's value
)
# How tensorrtllm_backend's launcher (scripts/launch_triton_server.py --multi_model) starts orchestrator mode: one
# MPI rank, the spawned executor workers own the GPUs, so Triton keeps no pinned or CUDA memory pools on them
ORCHESTRATOR_ENV = {"TRTLLM_ORCHESTRATOR": "1", "TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES": "1"}
ORCHESTRATOR_MPI = ["mpirun", "--allow-run-as-root", "-n", "1"]
ORCHESTRATOR_ARGS = ["--pinned-memory-pool-byte-size=0", "--enable-peer-access=false"]


def server_launch(r: LLMRecipe) -> dict:
    """The environment, launcher prefix and tritonserver arguments this group needs ({} = a plain start)."""
    if not needs_orchestrator(r):
        return {}
    pools = [
        f"--cuda-memory-pool-byte-size={gpu}:0" for gpu in sorted(set(r.serving.gpu_device_ids))
    ]
    return {
        "env": ORCHESTRATOR_ENV,
        "launcher": ORCHESTRATOR_MPI,
        "args": ORCHESTRATOR_ARGS + pools,
    }


def needs_orchestrator(r: LLMRecipe) -> bool:
    """A multi-GPU engine or several instances: one tritonserver drives the ranks by spawning executor workers
    (orchestrator mode, TRTLLM_ORCHESTRATOR=1) instead of one MPI-launched server per rank."""
    world = r.engine.tp_size * r.engine.pp_size
    return world > 1 or len(r.serving.gpu_device_ids) > world


def _lora_inputs(r: LLMRecipe, mc, pb2, *, scalar_reshape: bool) -> None:
    """lora_task_id (reshaped to a scalar where upstream does) and the ragged weights and config."""
    if r.lora is None:
        return
    for name, dtype, dims, ragged in LORA_INPUTS:
        _tensor(
            mc.input,
            pb2,
            name,
            dtype,
            dims,
            optional=True,
            ragged=ragged,
            reshape=[] if scalar_reshape and not ragged else None,
        )


def request_inputs(r: LLMRecipe) -> list[tuple[str, str, list[int], str | None]]:
    """REQUEST_INPUTS this recipe declares: the guide inputs only with serving.guided_decoding."""
    guided = r.serving.guided_decoding is not None
    return [i for i in REQUEST_INPUTS if guided or i[0] not in GUIDE_INPUTS]


def _request_inputs(r: LLMRecipe, mc, pb2, *, bls: bool = False) -> None:
    _tensor(mc.input, pb2, "text_input", "TYPE_STRING", [1])
    _tensor(mc.input, pb2, "max_tokens", "TYPE_INT32", [1])
    for name, dtype, dims, _ in request_inputs(r):
        reshape = [] if bls and name in BLS_SCALARS else None
        _tensor(
            mc.input,
            pb2,
            name,
            dtype,
            dims,
            optional=True,
            reshape=reshape,
            ragged=not bls and name in RAGGED,
        )
    for alias, target in CLIENT_ALIASES.items():
        _, dtype, dims, _ = next(i for i in REQUEST_INPUTS if i[3] == target)
        _tensor(mc.input, pb2, alias, dtype, dims, optional=True)


def preprocessing(
    r: LLMRecipe,
    names: Names,
    mbs: int,
    end_id: int,
    pad_id: int,
    tokenizer_file: str = "tokenizer/tokenizer.json",
):
    pb2 = model_config_pb2()
    mc = _base(pb2, names.preprocessing, mbs, backend="python")
    _tensor(mc.input, pb2, "text_input", "TYPE_STRING", [1])
    _tensor(mc.input, pb2, "max_tokens", "TYPE_INT32", [1])
    for name in ("end_id", "pad_id"):
        _tensor(mc.input, pb2, name, "TYPE_INT32", [1], optional=True)
    for name in ("stop_words", "bad_words"):
        _tensor(mc.input, pb2, name, "TYPE_STRING", [-1], optional=True)
    for name in ("min_tokens", *CLIENT_ALIASES):
        _tensor(mc.input, pb2, name, "TYPE_INT32", [1], optional=True)
    _tensor(mc.output, pb2, "input_ids", "TYPE_INT32", [-1])
    _tensor(mc.output, pb2, "input_lengths", "TYPE_INT32", [1])
    _tensor(mc.output, pb2, "request_output_len", "TYPE_INT32", [1])
    _tensor(mc.output, pb2, "end_id", "TYPE_INT32", [1])
    _tensor(mc.output, pb2, "pad_id", "TYPE_INT32", [1])
    _tensor(mc.output, pb2, "stop_words_list", "TYPE_INT32", [2, -1])
    _tensor(mc.output, pb2, "bad_words_list", "TYPE_INT32", [2, -1])
    _tensor(
        mc.output, pb2, "min_tokens", "TYPE_INT32", [1]
    )  # only when the request gave min_tokens/min_length
    _instances(mc, pb2, r.serving.instances.preprocessing)
    _params(
        mc,
        {
            "tokenizer_file": tokenizer_file,
            "add_special_tokens": r.serving.add_special_tokens,
            "end_id": end_id,
            "pad_id": pad_id,
        },
    )
    mc.default_model_filename = "model.py"
    return mc


def postprocessing(
    r: LLMRecipe, names: Names, mbs: int, tokenizer_file: str = "tokenizer/tokenizer.json"
):
    pb2 = model_config_pb2()
    mc = _base(pb2, names.postprocessing, mbs, backend="python")
    _tensor(mc.input, pb2, "tokens_batch", "TYPE_INT32", [-1, -1])
    _tensor(mc.input, pb2, "sequence_length", "TYPE_INT32", [-1])
    _tensor(mc.output, pb2, "output", "TYPE_STRING", [-1])
    # NOTE: a streamed ensemble sends each token's text through here; more than one instance could reorder them
    _instances(mc, pb2, 1 if r.serving.streaming else r.serving.instances.postprocessing)
    _params(mc, {"tokenizer_file": tokenizer_file, "skip_special_tokens": True})
    mc.default_model_filename = "model.py"
    return mc


def tensorrt_llm(r: LLMRecipe, names: Names, engine: dict, engine_path: str):
    """The tensorrtllm C++ backend model; limits come from the engine, runtime knobs from the recipe."""
    pb2 = model_config_pb2()
    bc = engine["build_config"]
    mbs = int(bc["max_batch_size"])
    mc = _base(pb2, names.tensorrt_llm, mbs, backend="tensorrtllm")
    mc.model_transaction_policy.decoupled = r.serving.streaming
    write_dynamic_batching(
        mc,
        {
            "preferred_batch_sizes": [mbs],
            "max_queue_delay_us": r.serving.max_queue_delay_us,
            "default_queue_policy": {"max_queue_size": r.serving.max_queue_size},
        },
    )
    for name, dtype, dims, optional, reshape, ragged in TOKEN_INPUTS:
        _tensor(mc.input, pb2, name, dtype, dims, optional=optional, reshape=reshape, ragged=ragged)
    for _, dtype, dims, target in request_inputs(r):
        if target is not None:
            ragged = target in RAGGED  # upstream: ragged, no reshape
            _tensor(
                mc.input,
                pb2,
                target,
                dtype,
                dims,
                reshape=None if ragged else [],
                optional=True,
                ragged=ragged,
            )
    _tensor(
        mc.input, pb2, "stop", "TYPE_BOOL", [1], reshape=[], optional=True
    )  # cancel by request id
    _lora_inputs(r, mc, pb2, scalar_reshape=True)
    _tensor(mc.output, pb2, "output_ids", "TYPE_INT32", [-1, -1])
    _tensor(mc.output, pb2, "sequence_length", "TYPE_INT32", [-1])
    logits = logits_type(engine)
    for name, dtype, dims in PASSTHROUGH_OUTPUTS[:4]:
        _tensor(mc.output, pb2, name, dtype, dims)
    for name, dims in LOGITS_OUTPUTS:
        _tensor(mc.output, pb2, name, logits, dims)
    for name, dtype, dims in PERF_OUTPUTS + PASSTHROUGH_OUTPUTS[4:]:
        _tensor(mc.output, pb2, name, dtype, dims)
    kv, s = r.kv_cache, r.serving
    world = r.engine.tp_size * r.engine.pp_size
    groups = [s.gpu_device_ids[i : i + world] for i in range(0, len(s.gpu_device_ids), world)]
    # NOTE: the C++ backend manages its GPUs itself (gpu_device_ids); Triton's instance kind stays CPU. Instance
    # i takes device group i % groups, so one instance per group (upstream docs/llama_multi_instance.md).
    _instances(mc, pb2, len(groups))
    params: dict[str, object] = {
        "gpt_model_type": s.batching_strategy,
        "gpt_model_path": engine_path,
        "max_beam_width": r.engine.max_beam_width,
        "batch_scheduler_policy": s.scheduler_policy,
        "kv_cache_free_gpu_mem_fraction": kv.free_gpu_mem_fraction,
        "enable_kv_cache_reuse": kv.enable_block_reuse,
        "exclude_input_in_output": s.exclude_input_in_output,
        "enable_chunked_context": s.enable_chunked_context,
        "normalize_log_probs": True,
        "FORCE_CPU_ONLY_INPUT_TENSORS": "no",
        **dict.fromkeys(UNGUARDED_EMPTY, ""),
    }
    if s.guided_decoding is not None:  # upstream turns it on when both are non-empty
        params["guided_decoding_backend"] = s.guided_decoding.backend
        info = f"{s.repository_mount}/{names.tensorrt_llm}/{r.version}/{XGRAMMAR_INFO}"
        params["xgrammar_tokenizer_info_path"] = info
    if r.lora is not None:
        for key in ("cache_gpu_memory_fraction", "cache_host_memory_bytes"):
            if getattr(r.lora, key) is not None:
                params[f"lora_{key}"] = getattr(r.lora, key)
    params.update(r.executor.model_dump())
    params.update(_kv_params(kv))
    params.update(speculative_params(r))
    params["gpu_device_ids"] = ";".join(",".join(map(str, g)) for g in groups)
    if needs_orchestrator(r):
        params["executor_worker_path"] = EXECUTOR_WORKER
    _params(mc, params)
    return mc


def _kv_params(kv) -> dict[str, object]:
    """The KV-cache parameters: offload always (the backend's defaults), the others only when set."""
    params: dict[str, object] = {
        "kv_cache_host_memory_bytes": kv.host_memory_bytes,
        "kv_cache_onboard_blocks": kv.onboard_blocks,
    }
    if kv.max_tokens is not None:
        params["max_tokens_in_paged_kv_cache"] = kv.max_tokens
    if kv.max_attention_window_size is not None:  # the backend parses a comma-separated list
        params["max_attention_window_size"] = ",".join(map(str, kv.max_attention_window_size))
    if kv.sink_token_length is not None:
        params["sink_token_length"] = kv.sink_token_length
    return params


def logits_type(engine: dict) -> str:
    """The Triton type of the engine's logits outputs (upstream's ${logits_datatype})."""
    return LOGITS_TYPE[engine["pretrained_config"].get("logits_dtype", "float32")]


def _answer_outputs(mc, pb2, logits: str, passthrough) -> None:
    """text_output, the passed-through outputs and upstream's two logits outputs (returned on request)."""
    _tensor(mc.output, pb2, "text_output", "TYPE_STRING", [-1])
    for name, dtype, dims in passthrough:
        _tensor(mc.output, pb2, name, dtype, dims)
    for name, dims in LOGITS_OUTPUTS:
        _tensor(mc.output, pb2, name, logits, dims)


def ensemble(r: LLMRecipe, names: Names, mbs: int, logits: str):
    pb2 = model_config_pb2()
    mc = _base(pb2, names.ensemble, mbs, platform="ensemble")
    _request_inputs(r, mc, pb2)
    _lora_inputs(r, mc, pb2, scalar_reshape=False)
    _answer_outputs(mc, pb2, logits, PASSTHROUGH_OUTPUTS + PERF_OUTPUTS)
    pre_in = {
        n: n
        for n in (
            "text_input",
            "max_tokens",
            "end_id",
            "pad_id",
            "stop_words",
            "bad_words",
            "min_tokens",
            *CLIENT_ALIASES,
        )
    }
    pre_out = {
        "input_ids": "_INPUT_ID",
        "input_lengths": "_INPUT_LEN",
        "request_output_len": "_REQUEST_OUTPUT_LEN",
        "end_id": "_END_ID",
        "pad_id": "_PAD_ID",
        "stop_words_list": "_STOP_WORDS_IDS",
        "bad_words_list": "_BAD_WORDS_IDS",
        "min_tokens": "_MIN_TOKENS",
    }
    llm_in = {target: name for name, _, _, target in request_inputs(r) if target is not None}
    llm_in.update(pre_out)
    llm_in.update({name: name for name, *_ in LORA_INPUTS if r.lora is not None})
    llm_out = {
        "output_ids": "_TOKENS_BATCH",
        "sequence_length": "_SEQUENCE_LENGTH",
        **{name: name for name, _, _ in PASSTHROUGH_OUTPUTS + PERF_OUTPUTS},
        **{name: name for name, _ in LOGITS_OUTPUTS},
    }
    steps = [
        (names.preprocessing, pre_in, pre_out),
        (names.tensorrt_llm, llm_in, llm_out),
        (
            names.postprocessing,
            {"tokens_batch": "_TOKENS_BATCH", "sequence_length": "_SEQUENCE_LENGTH"},
            {"output": "text_output"},
        ),
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


def bls(r: LLMRecipe, names: Names, mbs: int, logits: str):
    pb2 = model_config_pb2()
    mc = _base(pb2, names.bls, mbs, backend="python")
    mc.model_transaction_policy.decoupled = r.serving.streaming
    _request_inputs(r, mc, pb2, bls=True)
    _lora_inputs(r, mc, pb2, scalar_reshape=True)
    _answer_outputs(
        mc, pb2, logits, PASSTHROUGH_OUTPUTS[:2] + PASSTHROUGH_OUTPUTS[4:] + PERF_OUTPUTS
    )
    _instances(mc, pb2, r.serving.instances.bls)
    _params(
        mc,
        {
            "preprocessing_model": names.preprocessing,
            "llm_model": names.tensorrt_llm,
            "postprocessing_model": names.postprocessing,
            "request_inputs": ",".join(
                [f"{n}:{t}" for n, _, _, t in request_inputs(r) if t is not None]
                + [f"{n}:{t}" for n, t in CLIENT_ALIASES.items()]
                + [f"{n}:{n}" for n, *_ in LORA_INPUTS if r.lora is not None]
            ),
        },
    )
    mc.default_model_filename = "model.py"
    return mc
