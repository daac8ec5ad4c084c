"""runtime: pytorch — TensorRT-LLM's LLM API (PyTorch backend) as a Triton Python model with model.yaml.
No engine is built: the checkpoint is packaged; a quantized model is a checkpoint ModelOpt already quantized
(hf_quant_config.json, read by the LLM API itself: TorchLlmArgs takes no quant_config). Without batching in
Triton (max_batch_size 0): the LLM API batches itself. Streaming is decoupled, through the response sender."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from tritonbuild.backends.tensorrtllm.llmapi_keys import instance_groups, llm_api_args
from tritonbuild.backends.tensorrtllm.recipe import LLMAPI_EXECUTOR, LLMRecipe
from tritonbuild.backends.tensorrtllm.speculative import DRAFT_DIR, speculative_config
from tritonbuild.core.hashing import sha256_json
from tritonbuild.recipe.models import TensorSpec

# upstream's llmapi/tensorrt_llm interface (TensorRT-LLM triton_backend/all_models/llmapi, recorded in
# tests/contracts/facts/trtllm_llmapi.json)
SAMPLING = {
    "temperature": "fp32",
    "top_k": "int32",
    "top_p": "fp32",
    "frequency_penalty": "fp32",
    "presence_penalty": "fp32",
    "max_tokens": "int32",
    "seed": "uint64",
    "exclude_input_from_output": "bool",
    "return_perf_metrics": "bool",
}
INPUTS = [
    TensorSpec(name="text_input", dtype="bytes", dims=[-1]),
    TensorSpec(name="streaming", dtype="bool", dims=[1], optional=True),
    *[
        TensorSpec(name=f"sampling_param_{k}", dtype=v, dims=[1], optional=True)
        for k, v in SAMPLING.items()
    ],
    TensorSpec(name="sampling_param_stop", dtype="bytes", dims=[-1], optional=True),
    *[
        TensorSpec(name=f"return_{k}", dtype="bool", dims=[1], optional=True)
        for k in ("finish_reason", "stop_reason", "cumulative_logprob")
    ],
]
# a LoRA request (declared where the recipe has adapters): the adapter's id, name and directory on the server
LORA_INPUTS = [
    TensorSpec(name="lora_id", dtype="uint64", dims=[1], optional=True),
    *[
        TensorSpec(name=f"lora_{k}", dtype="bytes", dims=[1], optional=True)
        for k in ("name", "path", "ckpt_source")
    ],
]
# the guide of guided decoding (declared with serving.guided_decoding): upstream's LLM-API model has none, these are
# the tensorrtllm backend's names, which the OpenAI frontend sends; they become SamplingParams.guided_decoding
GUIDE_INPUTS = [
    TensorSpec(name=n, dtype="bytes", dims=[1], optional=True)
    for n in ("guided_decoding_guide_type", "guided_decoding_guide")
]
# returned when a request sets sampling_param_return_perf_metrics (KV-cache blocks, timestamps, draft acceptance)
PERF_OUTPUTS = [
    *[
        TensorSpec(name=n, dtype="int32", dims=[-1])
        for n in (
            "kv_cache_reused_block",
            "kv_cache_missed_block",
            "kv_cache_alloc_new_blocks",
            "kv_cache_alloc_total_blocks",
        )
    ],
    TensorSpec(name="kv_cache_hit_rate", dtype="fp32", dims=[-1]),
    *[
        TensorSpec(name=f"{n}_time_ns", dtype="int64", dims=[1])
        for n in ("arrival", "first_scheduled", "first_token", "last_token")
    ],
    TensorSpec(name="acceptance_rate", dtype="fp32", dims=[1]),
    *[
        TensorSpec(name=n, dtype="int32", dims=[1])
        for n in ("total_accepted_draft_tokens", "total_draft_tokens")
    ],
]
OUTPUTS = [
    TensorSpec(name="text_output", dtype="bytes", dims=[-1]),
    TensorSpec(name="finish_reason", dtype="bytes", dims=[-1]),
    TensorSpec(name="stop_reason", dtype="bytes", dims=[-1]),
    TensorSpec(name="cumulative_logprob", dtype="fp32", dims=[-1]),
    *PERF_OUTPUTS,
]
# Beyond upstream's llmapi template, from the LLM API itself (facts/llm_args.json request): SamplingParams.min_tokens,
# repetition_penalty, length_penalty, end_id, pad_id and bad (the ensemble's sampling inputs a client such as
# genai-perf --extra-inputs sends to <name>_openai), and the token counts of RequestOutput.prompt_token_ids /
# CompletionOutput.token_ids (newly generated in a streamed response), which the OpenAI frontend reads as usage
EXT_INPUTS = [
    TensorSpec(name="sampling_param_min_tokens", dtype="int32", dims=[1], optional=True),
    *[
        TensorSpec(name=f"sampling_param_{k}", dtype=v, dims=[1], optional=True)
        for k, v in (
            ("repetition_penalty", "fp32"),
            ("length_penalty", "fp32"),
            ("end_id", "int32"),
            ("pad_id", "int32"),
        )
    ],
    TensorSpec(name="sampling_param_bad", dtype="bytes", dims=[-1], optional=True),
]
EXT_OUTPUTS = [
    TensorSpec(name="num_input_tokens", dtype="int32", dims=[1]),
    TensorSpec(name="num_output_tokens", dtype="int32", dims=[1]),
]
MODEL_PY = Path(__file__).parent / "models" / "llmapi.py"
ADAPTER_PY = Path(__file__).parent / "models" / "openai_adapter.py"
# <name>_openai: what Triton's OpenAI frontend and genai-perf send (the ensemble's names and types, upstream's
# inflight_batcher_llm ones) → the llmapi model's input it means
ADAPTER_MAP = {
    "stream": "streaming",
    "max_tokens": "sampling_param_max_tokens",
    **{
        k: f"sampling_param_{k}"
        for k in (
            "temperature",
            "top_k",
            "top_p",
            "frequency_penalty",
            "presence_penalty",
            "seed",
            "return_perf_metrics",
        )
    },
    "exclude_input_in_output": "sampling_param_exclude_input_from_output",
    "stop_words": "sampling_param_stop",
    "min_tokens": "sampling_param_min_tokens",
    "min_length": "sampling_param_min_tokens",  # genai-perf's name for min_tokens (configs.CLIENT_ALIASES)
    **{
        k: f"sampling_param_{k}"
        for k in ("repetition_penalty", "length_penalty", "end_id", "pad_id")
    },
    "bad_words": "sampling_param_bad",
}
# the ensemble's perf outputs the adapter returns, from the llmapi model's output of (mostly) the same name
ADAPTER_PERF = {
    "kv_cache_reused_blocks": "kv_cache_reused_block",
    **{
        n: n
        for n in (
            "kv_cache_alloc_new_blocks",
            "kv_cache_alloc_total_blocks",
            "arrival_time_ns",
            "first_scheduled_time_ns",
            "first_token_time_ns",
            "last_token_time_ns",
            "acceptance_rate",
            "total_accepted_draft_tokens",
            "total_draft_tokens",
        )
    },
}
COUNTS = (
    "return_num_input_tokens",
    "return_num_output_tokens",
)  # ask for num_input_tokens / num_output_tokens


def peft_lora_step(loaded, ctx, recipe_dir) -> list[tuple[str, dict, dict[str, str]]]:
    """runtime: pytorch: the recipe's LoRA adapters as the LLM API loads them (Hugging Face PEFT directories,
    lora_ckpt_source hf), keyed by content; an adapter whose rank exceeds LoraConfig.max_lora_rank is refused.
    recipe_dir(loaded, rel, key) resolves a directory of the recipe."""
    from tritonbuild.backends.common import tree_inputs
    from tritonbuild.errors import PlanError

    r: LLMRecipe = loaded.recipe
    if r.lora is None:
        return []
    adapters, inputs = {}, {}
    for name, rel in r.lora.adapters.items():
        where = loaded.where(("lora", "adapters", name))
        d = recipe_dir(loaded, rel, ("lora", "adapters", name))
        if not (d / "adapter_config.json").is_file():
            raise PlanError(
                f"LoRA adapter {name!r} at {d} has no adapter_config.json: the LLM API loads Hugging "
                "Face PEFT adapters (lora_ckpt_source hf)",
                where=where,
                hint="save the adapter with peft's save_pretrained(DIR); TensorRT-LLM's .npy adapters "
                "are for runtime: engine",
            )
        rank = json.loads((d / "adapter_config.json").read_text()).get("r")
        limit = r.lora.max_lora_rank or MAX_LORA_RANK
        if isinstance(rank, int) and rank > limit:
            raise PlanError(
                f"LoRA adapter {name!r} has rank {rank}, above max_lora_rank {limit}",
                where=where,
                hint=f"set lora.max_lora_rank: {rank}",
            )
        adapters[name], files = tree_inputs(d, ctx)
        inputs.update(files)
    return [("trtllm.lora", {"adapters": adapters}, inputs)]


MAX_LORA_RANK = 64  # LoraConfig.max_lora_rank's default (tensorrt_llm/lora_helper.py)


def model_yaml(r: LLMRecipe, loras: list[str] = ()) -> dict:
    """LLM() constructor arguments; 'model' and lora_config.lora_dir are relative to the version directory
    (relocatable). loras: the packaged LoRA adapters' names. triton_config is the generated model's own (popped
    before LLM(), as upstream's model does): decoupled, and the default of exclude_input_from_output."""
    e, kv = r.engine, r.kv_cache
    spec = {
        "model": "checkpoint",
        "backend": "pytorch",
        "dtype": r.dtype,
        "tensor_parallel_size": e.tp_size,
        "pipeline_parallel_size": e.pp_size,
        "max_batch_size": e.max_batch_size,
        "max_seq_len": e.max_seq_len,
        "max_num_tokens": e.max_num_tokens,
        "kv_cache_config": {
            "free_gpu_memory_fraction": kv.free_gpu_mem_fraction,
            "enable_block_reuse": kv.enable_block_reuse,
            "tokens_per_block": kv.tokens_per_block,
        },
        "triton_config": {
            "max_batch_size": 0,
            "decoupled": r.serving.streaming,
            "exclude_input_in_output": r.serving.exclude_input_in_output,
        },
        **llm_api_args(r),
    }
    if kv.max_tokens is not None:
        spec["kv_cache_config"]["max_tokens"] = kv.max_tokens
    if kv.dtype != "auto":
        spec["kv_cache_config"]["dtype"] = kv.dtype
    if kv.max_attention_window_size is not None:
        spec["kv_cache_config"]["max_attention_window"] = list(kv.max_attention_window_size)
    if kv.sink_token_length is not None:
        spec["kv_cache_config"]["sink_token_length"] = kv.sink_token_length
    spec.update(
        {k: getattr(r.executor, k) for k in LLMAPI_EXECUTOR if k in r.executor.model_fields_set}
    )
    if (spec_config := speculative_config(r)) is not None:
        spec["speculative_config"] = spec_config
    if r.serving.guided_decoding is not None:
        spec["guided_decoding_backend"] = r.serving.guided_decoding.backend
    if r.lora is not None:  # LoraConfig: the adapters' directories and the limits the recipe sets
        spec["lora_config"] = {
            "lora_dir": [f"{LORA_DIR}/{n}" for n in sorted(loras)],
            **{
                k: getattr(r.lora, k)
                for k in ("max_lora_rank", "max_loras", "max_cpu_loras")
                if getattr(r.lora, k) is not None
            },
        }
    return spec


LORA_DIR = "lora"  # where the adapters live in the LLM-API model's version directory
# what the OpenAI frontend loads beside each LoRA name of multi_lora.json (and sends with a LoRA's first request);
# the LLM API reads the PEFT adapter itself from lora_path, so the adapter model drops these arrays
FRONTEND_LORA_FILES = {
    "model.lora_weights.npy": ("float16", (1, 1, 1)),
    "model.lora_config.npy": ("int32", (1, 1, 3)),
}


def llm_inputs(r: LLMRecipe) -> list[TensorSpec]:
    """The LLM-API model's inputs: upstream's, min_tokens, its LoRA inputs with adapters, the guide with guided
    decoding."""
    return [
        *INPUTS,
        *EXT_INPUTS,
        *(LORA_INPUTS if r.lora is not None else []),
        *(GUIDE_INPUTS if r.serving.guided_decoding is not None else []),
    ]


def adapter_inputs(r: LLMRecipe) -> list[TensorSpec]:
    """<name>_openai's inputs: the ensemble's names and types for what the clients send and the LLM-API model
    takes (the guide only with guided decoding, lora_task_id/weights/config only with adapters)."""
    from tritonbuild.backends.tensorrtllm.tensors import LORA_INPUTS as ENGINE_LORA
    from tritonbuild.backends.tensorrtllm.tensors import request_inputs
    from tritonbuild.recipe.models import DTYPES

    dtype = {v: k for k, v in DTYPES.items()}
    known = {n: (dtype[t], dims) for n, t, dims, _ in request_inputs(r)}
    known["min_length"] = known["min_tokens"]
    guide = [t.name for t in GUIDE_INPUTS if r.serving.guided_decoding is not None]
    lora = [
        TensorSpec(name=n, dtype=dtype[t], dims=dims, optional=True)
        for n, t, dims, _ in ENGINE_LORA
        if r.lora is not None
    ]
    return [
        TensorSpec(name="text_input", dtype="bytes", dims=[1]),
        TensorSpec(name="max_tokens", dtype="int32", dims=[1]),
        *[
            TensorSpec(name=n, dtype=known[n][0], dims=known[n][1], optional=True)
            for n in (*ADAPTER_MAP, *COUNTS, *guide)
            if n != "max_tokens"
        ],
        *lora,
    ]


def adapter_outputs() -> list[TensorSpec]:
    from tritonbuild.backends.tensorrtllm.tensors import PERF_OUTPUTS as ENSEMBLE_PERF
    from tritonbuild.recipe.models import DTYPES

    dtype = {v: k for k, v in DTYPES.items()}
    return [
        TensorSpec(name="text_output", dtype="bytes", dims=[-1]),
        *EXT_OUTPUTS,
        *[
            TensorSpec(name=n, dtype=dtype[t], dims=dims)
            for n, t, dims in ENSEMBLE_PERF
            if n in ADAPTER_PERF
        ],
    ]


def _adapter_loras(r: LLMRecipe, root: Path, name: str, loras: list[str]) -> str:
    """multi_lora.json beside <name>_openai (name → the frontend's .npy pair, relative to the repository; task ids
    from 1 in file order) and the adapter's table task id → LoRA name."""
    import numpy as np

    v = str(r.version)
    table = {n: f"{name}/{v}/{LORA_DIR}/{n}" for n in sorted(loras)}
    for rel in table.values():
        (root / rel).mkdir(parents=True, exist_ok=True)
        for f, (dtype, shape) in FRONTEND_LORA_FILES.items():
            with open(root / rel / f, "wb") as fh:
                np.save(fh, np.zeros(shape, dtype=dtype))
    if table:
        (root / name / v / "multi_lora.json").write_text(json.dumps(table, indent=1) + "\n")
    return ",".join(f"{i}:{n}" for i, n in enumerate(table, start=1))


def _adapter(r: LLMRecipe, root: Path, pb2, loras: list[str]):
    """<name>_openai: the client-format front of the LLM-API model (see models/openai_adapter.py)."""
    from tritonbuild.triton.config import add_tensors, render

    name = f"{r.name}_openai"
    (root / name / str(r.version)).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ADAPTER_PY, root / name / str(r.version) / "model.py")
    mc = pb2.ModelConfig()
    mc.name, mc.backend, mc.max_batch_size = name, "python", r.engine.max_batch_size
    mc.version_policy.latest.num_versions = 1
    mc.model_transaction_policy.decoupled = r.serving.streaming
    add_tensors(mc.input, adapter_inputs(r), pb2, True)
    add_tensors(mc.output, adapter_outputs(), pb2, False)
    g = mc.instance_group.add()
    g.kind, g.count = pb2.ModelInstanceGroup.Kind.Value("KIND_CPU"), 1
    guide = {t.name: t.name for t in GUIDE_INPUTS if r.serving.guided_decoding is not None}
    params = {
        "llm_model": r.name,
        "input_map": ",".join(f"{k}:{v}" for k, v in {**ADAPTER_MAP, **guide}.items()),
        "output_map": ",".join(f"{k}:{v}" for k, v in ADAPTER_PERF.items()),
    }
    if loras:
        params.update(
            loras=_adapter_loras(r, root, name, loras), lora_dir=f"{r.name}/{r.version}/{LORA_DIR}"
        )
    for k, v in params.items():
        mc.parameters[k].string_value = v
    mc.default_model_filename = "model.py"
    (root / name / "config.pbtxt").write_bytes(render(mc))
    return name


def emit(built_model, root: Path, store, manifest_model) -> list:
    from tritonbuild.triton.config import add_tensors, model_config_pb2, render

    r: LLMRecipe = built_model.plan.recipe
    vdir = root / r.name / str(r.version)
    # NOTE: a quantized checkpoint given with --engine NAME=DIR arrives under quantize/ (its step's name)
    files = {
        "checkpoint/" + k.split("/", 1)[1]: e
        for k, e in built_model.files.items()
        if k.startswith(("checkpoint/", "quantize/"))
    }
    if not files:  # the quantize step was skipped here
        return []
    files.update(
        {
            k: e
            for k, e in built_model.files.items()
            if k.startswith((f"{LORA_DIR}/", f"{DRAFT_DIR}/"))
        }
    )
    loras = sorted({k.split("/")[1] for k in files if k.startswith(f"{LORA_DIR}/")})
    for rel, entry in files.items():
        store.materialize(entry.sha256, vdir / rel)
    (vdir / "model.yaml").write_text(yaml.safe_dump(model_yaml(r, loras), sort_keys=True))
    shutil.copyfile(MODEL_PY, vdir / "model.py")
    pb2 = model_config_pb2()
    mc = pb2.ModelConfig()
    mc.name, mc.backend, mc.max_batch_size = r.name, "python", 0
    mc.version_policy.latest.num_versions = 1
    mc.model_transaction_policy.decoupled = r.serving.streaming
    add_tensors(mc.input, llm_inputs(r), pb2, True)
    add_tensors(mc.output, [*OUTPUTS, *EXT_OUTPUTS], pb2, False)
    g = (
        mc.instance_group.add()
    )  # one instance per GPU group; the model places itself (gpu_device_ids)
    g.kind, g.count = pb2.ModelInstanceGroup.Kind.Value("KIND_MODEL"), len(instance_groups(r))
    mc.parameters["gpu_device_ids"].string_value = ";".join(
        ",".join(map(str, g)) for g in instance_groups(r)
    )
    mc.default_model_filename = "model.py"
    (root / r.name / "config.pbtxt").write_bytes(render(mc))
    adapter = _adapter(r, root, pb2, loras)
    identity = sha256_json({k: e.sha256 for k, e in files.items()})
    llm = {
        "group": r.name,
        "runtime": "pytorch",
        "model_yaml": model_yaml(r, loras),
        "memory_plan": built_model.plan.extras.get("memory_plan"),
        "serving_image": r.image.triton_image,
    }
    return [
        manifest_model(
            name=r.name,
            version=r.version,
            backend="python",
            target="gpu",
            model_identity=identity,
            inputs=llm_inputs(r),
            outputs=[*OUTPUTS, *EXT_OUTPUTS],
            max_batch_size=0,
            llm=llm,
        ),
        manifest_model(
            name=adapter,
            version=r.version,
            backend="python",
            target="gpu",
            model_identity=identity,
            inputs=adapter_inputs(r),
            outputs=adapter_outputs(),
            max_batch_size=r.engine.max_batch_size,
            llm=llm,
        ),
    ]
