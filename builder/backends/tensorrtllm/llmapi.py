"""runtime: pytorch — TensorRT-LLM's LLM API (PyTorch backend) as a Triton Python model with model.yaml.
No engine is built: the checkpoint is packaged; a quantized model is a checkpoint ModelOpt already quantized
(hf_quant_config.json, read by the LLM API itself: TorchLlmArgs takes no quant_config). Without batching in
Triton (max_batch_size 0): the LLM API batches itself. Streaming is decoupled, through the response sender."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from tritonbuild.backends.tensorrtllm.recipe import LLMRecipe
from tritonbuild.core.hashing import sha256_json
from tritonbuild.recipe.models import TensorSpec

# upstream's llmapi/tensorrt_llm interface (tensorrtllm_backend all_models/llmapi, recorded in tests/contracts)
SAMPLING = {"temperature": "fp32", "top_k": "int32", "top_p": "fp32", "frequency_penalty": "fp32",
            "presence_penalty": "fp32", "max_tokens": "int32", "seed": "uint64", "exclude_input_from_output": "bool"}
INPUTS = [TensorSpec(name="text_input", dtype="bytes", dims=[-1]),
          TensorSpec(name="streaming", dtype="bool", dims=[1], optional=True),
          *[TensorSpec(name=f"sampling_param_{k}", dtype=v, dims=[1], optional=True) for k, v in SAMPLING.items()],
          TensorSpec(name="sampling_param_stop", dtype="bytes", dims=[-1], optional=True),
          *[TensorSpec(name=f"return_{k}", dtype="bool", dims=[1], optional=True)
            for k in ("finish_reason", "stop_reason", "cumulative_logprob")]]
OUTPUTS = [TensorSpec(name="text_output", dtype="bytes", dims=[-1]),
           TensorSpec(name="finish_reason", dtype="bytes", dims=[-1]),
           TensorSpec(name="stop_reason", dtype="bytes", dims=[-1]),
           TensorSpec(name="cumulative_logprob", dtype="fp32", dims=[-1])]
# Beyond upstream's llmapi template, from the LLM API itself (facts/llm_args.json request): SamplingParams.min_tokens,
# and the token counts of RequestOutput.prompt_token_ids / CompletionOutput.token_ids (newly generated in a
# streamed response), which the OpenAI frontend reads as usage
EXT_INPUTS = [TensorSpec(name="sampling_param_min_tokens", dtype="int32", dims=[1], optional=True)]
EXT_OUTPUTS = [TensorSpec(name="num_input_tokens", dtype="int32", dims=[1]),
               TensorSpec(name="num_output_tokens", dtype="int32", dims=[1])]
MODEL_PY = Path(__file__).parent / "models" / "llmapi.py"
ADAPTER_PY = Path(__file__).parent / "models" / "openai_adapter.py"
# <name>_openai: what Triton's OpenAI frontend and genai-perf send (the ensemble's names and types, upstream's
# inflight_batcher_llm ones) → the llmapi model's input it means
ADAPTER_MAP = {"stream": "streaming", "max_tokens": "sampling_param_max_tokens",
               **{k: f"sampling_param_{k}" for k in ("temperature", "top_k", "top_p", "frequency_penalty",
                                                      "presence_penalty", "seed")},
               "exclude_input_in_output": "sampling_param_exclude_input_from_output",
               "stop_words": "sampling_param_stop", "min_tokens": "sampling_param_min_tokens",
               "min_length": "sampling_param_min_tokens"}  # genai-perf's name for min_tokens (configs.CLIENT_ALIASES)
COUNTS = ("return_num_input_tokens", "return_num_output_tokens")  # ask for num_input_tokens / num_output_tokens


def model_yaml(r: LLMRecipe) -> dict:
    """LLM() constructor arguments; 'model' is relative to the version directory (relocatable)."""
    e, kv = r.engine, r.kv_cache
    spec = {"model": "checkpoint", "backend": "pytorch", "dtype": r.dtype,
            "tensor_parallel_size": e.tp_size, "pipeline_parallel_size": e.pp_size,
            "max_batch_size": e.max_batch_size, "max_seq_len": e.max_seq_len, "max_num_tokens": e.max_num_tokens,
            "kv_cache_config": {"free_gpu_memory_fraction": kv.free_gpu_mem_fraction,
                                "enable_block_reuse": kv.enable_block_reuse,
                                "tokens_per_block": kv.tokens_per_block},
            "triton_config": {"max_batch_size": 0, "decoupled": r.serving.streaming}}
    if kv.max_tokens is not None:
        spec["kv_cache_config"]["max_tokens"] = kv.max_tokens
    if kv.dtype != "auto":
        spec["kv_cache_config"]["dtype"] = kv.dtype
    return spec


def adapter_inputs() -> list[TensorSpec]:
    from tritonbuild.backends.tensorrtllm.configs import REQUEST_INPUTS
    from tritonbuild.recipe.models import DTYPES

    dtype = {v: k for k, v in DTYPES.items()}
    known = {n: (dtype[t], dims) for n, t, dims, _ in REQUEST_INPUTS}
    known["min_length"] = known["min_tokens"]
    return [TensorSpec(name="text_input", dtype="bytes", dims=[1]),
            TensorSpec(name="max_tokens", dtype="int32", dims=[1]),
            *[TensorSpec(name=n, dtype=known[n][0], dims=known[n][1], optional=True)
              for n in (*ADAPTER_MAP, *COUNTS) if n != "max_tokens"]]


def _adapter(r: LLMRecipe, root: Path, pb2):
    """<name>_openai: the client-format front of the LLM-API model (see models/openai_adapter.py)."""
    from tritonbuild.triton.config import add_tensors, render

    name = f"{r.name}_openai"
    (root / name / str(r.version)).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ADAPTER_PY, root / name / str(r.version) / "model.py")
    mc = pb2.ModelConfig()
    mc.name, mc.backend, mc.max_batch_size = name, "python", r.engine.max_batch_size
    mc.version_policy.latest.num_versions = 1
    mc.model_transaction_policy.decoupled = r.serving.streaming
    add_tensors(mc.input, adapter_inputs(), pb2, True)
    add_tensors(mc.output, ADAPTER_OUTPUTS, pb2, False)
    g = mc.instance_group.add()
    g.kind, g.count = pb2.ModelInstanceGroup.Kind.Value("KIND_CPU"), 1
    mc.parameters["llm_model"].string_value = r.name
    mc.parameters["input_map"].string_value = ",".join(f"{k}:{v}" for k, v in ADAPTER_MAP.items())
    mc.default_model_filename = "model.py"
    (root / name / "config.pbtxt").write_bytes(render(mc))
    return name


ADAPTER_OUTPUTS = [TensorSpec(name="text_output", dtype="bytes", dims=[-1]), *EXT_OUTPUTS]


def emit(built_model, root: Path, store, manifest_model) -> list:
    from tritonbuild.triton.config import add_tensors, model_config_pb2, render

    r: LLMRecipe = built_model.plan.recipe
    vdir = root / r.name / str(r.version)
    # NOTE: a quantized checkpoint given with --engine NAME=DIR arrives under quantize/ (its step's name)
    files = {"checkpoint/" + k.split("/", 1)[1]: e for k, e in built_model.files.items()
             if k.startswith(("checkpoint/", "quantize/"))}
    if not files:  # the quantize step was skipped here
        return []
    for rel, entry in files.items():
        store.materialize(entry.sha256, vdir / rel)
    (vdir / "model.yaml").write_text(yaml.safe_dump(model_yaml(r), sort_keys=True))
    shutil.copyfile(MODEL_PY, vdir / "model.py")
    pb2 = model_config_pb2()
    mc = pb2.ModelConfig()
    mc.name, mc.backend, mc.max_batch_size = r.name, "python", 0
    mc.version_policy.latest.num_versions = 1
    mc.model_transaction_policy.decoupled = r.serving.streaming
    add_tensors(mc.input, [*INPUTS, *EXT_INPUTS], pb2, True)
    add_tensors(mc.output, [*OUTPUTS, *EXT_OUTPUTS], pb2, False)
    g = mc.instance_group.add()
    g.kind, g.count = pb2.ModelInstanceGroup.Kind.Value("KIND_MODEL"), 1
    mc.default_model_filename = "model.py"
    (root / r.name / "config.pbtxt").write_bytes(render(mc))
    adapter = _adapter(r, root, pb2)
    identity = sha256_json({k: e.sha256 for k, e in files.items()})
    llm = {"group": r.name, "runtime": "pytorch", "model_yaml": model_yaml(r),
           "memory_plan": built_model.plan.extras.get("memory_plan"), "serving_image": r.image.triton_image}
    return [manifest_model(name=r.name, version=r.version, backend="python", target="gpu", model_identity=identity,
                           inputs=[*INPUTS, *EXT_INPUTS], outputs=[*OUTPUTS, *EXT_OUTPUTS], max_batch_size=0,
                           llm=llm),
            manifest_model(name=adapter, version=r.version, backend="python", target="gpu", model_identity=identity,
                           inputs=adapter_inputs(), outputs=ADAPTER_OUTPUTS, max_batch_size=r.engine.max_batch_size,
                           llm=llm)]
