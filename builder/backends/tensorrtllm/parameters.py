"""The tensorrt_llm model's parameters: what the tensorrtllm C++ backend reads, each set from the
recipe (the engine's limits are the engine's own), the ones it reads unguarded always present."""

from __future__ import annotations

from tritonbuild.backends.tensorrtllm.orchestrator import EXECUTOR_WORKER, needs_orchestrator
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
from tritonbuild.backends.tensorrtllm.speculative import backend_params as speculative_params

# parameters the C++ backend reads outside any try block (model_instance_state.cc): a missing one
# fails the load with "Cannot find parameter with name: …"; "" = the feature (guided decoding) is
# off
UNGUARDED = (
    "gpt_model_type",
    "tokenizer_dir",
    "xgrammar_tokenizer_info_path",
    "guided_decoding_backend",
)
UNGUARDED_VALUES = {"gpt_model_type": ("V1", "v1", "inflight_batching", "inflight_fused_batching")}
UNGUARDED_EMPTY = ("tokenizer_dir", "xgrammar_tokenizer_info_path", "guided_decoding_backend")

# written next to the engine when guided decoding is on
XGRAMMAR_INFO = "xgrammar_tokenizer_info.json"


def _kv_params(kv) -> dict[str, object]:
    """The KV-cache parameters: offload always (the backend's defaults), the others only when
    set."""
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


def device_groups(r: LLMRecipe) -> list[list[int]]:
    """serving.gpu_device_ids cut into one group of tp_size × pp_size GPUs per instance."""
    ids, world = r.serving.gpu_device_ids, r.engine.tp_size * r.engine.pp_size
    return [ids[i : i + world] for i in range(0, len(ids), world)]


def backend_parameters(r: LLMRecipe, names, engine_path: str) -> dict[str, object]:
    """Every parameter of the tensorrt_llm model: the engine's path, the scheduler, KV cache, LoRA
    cache, executor and speculative knobs, its device groups, orchestrator mode's worker."""
    kv, s = r.kv_cache, r.serving
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
    params["gpu_device_ids"] = ";".join(",".join(map(str, g)) for g in device_groups(r))
    if needs_orchestrator(r):
        params["executor_worker_path"] = EXECUTOR_WORKER
    return params
