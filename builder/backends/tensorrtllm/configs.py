"""ModelConfig protos for the TensorRT-LLM model group. Every parameter is set from the recipe and
the engine's config.json; nothing is a placeholder. Tensor names, dtypes and shapes are upstream's
(tensorrtllm_backend inflight_batcher_llm templates, recorded in tests/contracts/facts): the
ensemble and the BLS take the optional inputs Triton's OpenAI frontend and genai-perf send."""

from __future__ import annotations

from dataclasses import dataclass

from tritonbuild.backends.tensorrtllm.parameters import backend_parameters, device_groups
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
from tritonbuild.backends.tensorrtllm.tensors import (
    BLS_SCALARS,
    CLIENT_ALIASES,
    LOGITS_OUTPUTS,
    LORA_INPUTS,
    PASSTHROUGH_OUTPUTS,
    PERF_OUTPUTS,
    RAGGED,
    REQUEST_INPUTS,
    TOKEN_INPUTS,
    logits_type,
    request_inputs,
)
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
    # only when the request gave min_tokens/min_length
    _tensor(mc.output, pb2, "min_tokens", "TYPE_INT32", [1])
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
    # NOTE: a streamed ensemble sends each token's text through here; more than one instance could
    # reorder them
    _instances(mc, pb2, 1 if r.serving.streaming else r.serving.instances.postprocessing)
    _params(mc, {"tokenizer_file": tokenizer_file, "skip_special_tokens": True})
    mc.default_model_filename = "model.py"
    return mc


def tensorrt_llm(r: LLMRecipe, names: Names, engine: dict, engine_path: str):
    """The tensorrtllm C++ backend model; limits come from the engine, runtime knobs from the
    recipe."""
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
    # cancel by request id
    _tensor(mc.input, pb2, "stop", "TYPE_BOOL", [1], reshape=[], optional=True)
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
    groups = device_groups(r)
    # NOTE: the C++ backend manages its GPUs itself (gpu_device_ids); Triton's instance kind stays
    # CPU. Instance i takes device group i % groups, so one instance per group (upstream
    # docs/llama_multi_instance.md).
    _instances(mc, pb2, len(groups))
    params = backend_parameters(r, names, engine_path)
    _params(mc, params)
    return mc


def _answer_outputs(mc, pb2, logits: str, passthrough) -> None:
    """text_output, the passed-through outputs and upstream's two logits outputs (returned on
    request)."""
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
