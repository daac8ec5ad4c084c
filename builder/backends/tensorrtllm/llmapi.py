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
MODEL_PY = Path(__file__).parent / "models" / "llmapi.py"


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


def emit(built_model, root: Path, store, manifest_model) -> list:
    from tritonbuild.triton.config import add_tensors, model_config_pb2, render

    r: LLMRecipe = built_model.plan.recipe
    vdir = root / r.name / str(r.version)
    files = {k: e for k, e in built_model.files.items() if k.startswith("checkpoint/")}
    for rel, entry in files.items():
        store.materialize(entry.sha256, vdir / rel)
    (vdir / "model.yaml").write_text(yaml.safe_dump(model_yaml(r), sort_keys=True))
    shutil.copyfile(MODEL_PY, vdir / "model.py")
    pb2 = model_config_pb2()
    mc = pb2.ModelConfig()
    mc.name, mc.backend, mc.max_batch_size = r.name, "python", 0
    mc.version_policy.latest.num_versions = 1
    mc.model_transaction_policy.decoupled = r.serving.streaming
    add_tensors(mc.input, INPUTS, pb2, True)
    add_tensors(mc.output, OUTPUTS, pb2, False)
    g = mc.instance_group.add()
    g.kind, g.count = pb2.ModelInstanceGroup.Kind.Value("KIND_MODEL"), 1
    mc.default_model_filename = "model.py"
    (root / r.name / "config.pbtxt").write_bytes(render(mc))
    return [manifest_model(name=r.name, version=r.version, backend="python", target="gpu",
                           model_identity=sha256_json({k: e.sha256 for k, e in files.items()}),
                           inputs=INPUTS, outputs=OUTPUTS, max_batch_size=0,
                           llm={"group": r.name, "runtime": "pytorch", "model_yaml": model_yaml(r),
                                "memory_plan": built_model.plan.extras.get("memory_plan"),
                                "serving_image": r.image.triton_image})]
