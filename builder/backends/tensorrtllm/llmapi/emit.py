"""runtime: pytorch — TensorRT-LLM's LLM API (PyTorch backend) as a Triton Python model with
model.yaml. No engine is built: the checkpoint is packaged; a quantized model is a checkpoint
ModelOpt already quantized (hf_quant_config.json, read by the LLM API itself: TorchLlmArgs takes no
quant_config). Without batching in Triton (max_batch_size 0): the LLM API batches itself. Streaming
is decoupled, through the response sender."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from tritonbuild.backends.tensorrtllm.llmapi.adapter import (
    adapter_inputs,
    adapter_outputs,
    write_adapter,
)
from tritonbuild.backends.tensorrtllm.llmapi.keys import instance_groups, llm_api_args
from tritonbuild.backends.tensorrtllm.llmapi.tensors import (
    EXT_OUTPUTS,
    LORA_DIR,
    OUTPUTS,
    llm_inputs,
)
from tritonbuild.backends.tensorrtllm.recipe.model import LLMAPI_EXECUTOR, LLMRecipe
from tritonbuild.backends.tensorrtllm.speculative import DRAFT_DIR, speculative_config
from tritonbuild.core.hashing import sha256_json

MODEL_PY = Path(__file__).parents[1] / "models" / "llmapi.py"
TOKENIZER_DIR = "tokenizer"  # where the trtllm.tokenizer step packages the recipe's tokenizer


def peft_lora_step(loaded, ctx, recipe_dir) -> list[tuple[str, dict, dict[str, str]]]:
    """runtime: pytorch: the recipe's LoRA adapters as the LLM API loads them (Hugging Face PEFT
    directories, lora_ckpt_source hf), keyed by content; an adapter whose rank exceeds
    LoraConfig.max_lora_rank is refused. recipe_dir(loaded, rel, key) resolves a directory of the
    recipe."""
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
                f"LoRA adapter {name!r} at {d} has no adapter_config.json: the LLM API loads "
                "Hugging Face PEFT adapters (lora_ckpt_source hf)",
                where=where,
                hint="save the adapter with peft's save_pretrained(DIR); TensorRT-LLM's .npy "
                "adapters are for runtime: engine",
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
    """LLM() constructor arguments; 'model', 'tokenizer' (the recipe's tokenizer directory, where it
    names one; else LLM() reads the checkpoint's) and lora_config.lora_dir are relative to the
    version directory (relocatable). loras: the packaged LoRA adapters' names. triton_config is the
    generated model's own (popped before LLM(), as upstream's model does): decoupled, and the
    defaults of exclude_input_from_output and add_special_tokens."""
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
            # the generated model's default of SamplingParams.add_special_tokens
            "add_special_tokens": r.serving.add_special_tokens,
        },
        **llm_api_args(r),
    }
    if r.tokenizer is not None:  # packaged by the trtllm.tokenizer step (LLM(tokenizer=...))
        spec["tokenizer"] = TOKENIZER_DIR
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


def _packaged_files(built_model) -> dict:
    """The version directory's files (relative path → built entry): the checkpoint, the recipe's
    tokenizer, LoRA adapters, the draft; {} when the quantize step was skipped here."""
    # NOTE: a quantized checkpoint given with --engine NAME=DIR arrives under quantize/ (its step's
    # name)
    files = {
        "checkpoint/" + k.split("/", 1)[1]: e
        for k, e in built_model.files.items()
        if k.startswith(("checkpoint/", "quantize/"))
    }
    if not files:
        return {}
    files.update(
        {
            k: e
            for k, e in built_model.files.items()
            if k.startswith((f"{LORA_DIR}/", f"{DRAFT_DIR}/", f"{TOKENIZER_DIR}/"))
        }
    )
    return files


def _llm_config(r: LLMRecipe, pb2):
    """The LLM-API model's config: no batching in Triton (the LLM API batches), one instance per GPU
    group (the model places itself: gpu_device_ids)."""
    from tritonbuild.triton.config import add_tensors

    mc = pb2.ModelConfig()
    mc.name, mc.backend, mc.max_batch_size = r.name, "python", 0
    mc.version_policy.latest.num_versions = 1
    mc.model_transaction_policy.decoupled = r.serving.streaming
    add_tensors(mc.input, llm_inputs(r), pb2, True)
    add_tensors(mc.output, [*OUTPUTS, *EXT_OUTPUTS], pb2, False)
    g = mc.instance_group.add()
    g.kind, g.count = pb2.ModelInstanceGroup.Kind.Value("KIND_MODEL"), len(instance_groups(r))
    mc.parameters["gpu_device_ids"].string_value = ";".join(
        ",".join(map(str, g)) for g in instance_groups(r)
    )
    mc.default_model_filename = "model.py"
    return mc


def emit(built_model, root: Path, store, manifest_model) -> list:
    from tritonbuild.triton.config import model_config_pb2, write_config

    r: LLMRecipe = built_model.plan.recipe
    vdir = root / r.name / str(r.version)
    files = _packaged_files(built_model)
    if not files:  # the quantize step was skipped here
        return []
    loras = sorted({k.split("/")[1] for k in files if k.startswith(f"{LORA_DIR}/")})
    for rel, entry in files.items():
        store.materialize(entry.sha256, vdir / rel)
    (vdir / "model.yaml").write_text(yaml.safe_dump(model_yaml(r, loras), sort_keys=True))
    shutil.copyfile(MODEL_PY, vdir / "model.py")
    pb2 = model_config_pb2()
    write_config(root / r.name, _llm_config(r, pb2))
    adapter = write_adapter(r, root, pb2, loras)
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
