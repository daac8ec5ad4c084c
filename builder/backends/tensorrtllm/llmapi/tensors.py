"""The LLM-API model's interface: upstream's llmapi tensors, what tritonbuild adds (LoRA, the guide,
min_tokens and the token counts) and where its LoRA adapters live in the version directory."""

from __future__ import annotations

from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
from tritonbuild.recipe.models import TensorSpec

# upstream's llmapi/tensorrt_llm interface (TensorRT-LLM triton_backend/all_models/llmapi, recorded
# in tests/contracts/facts/trtllm_llmapi.json)
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
# a LoRA request (declared where the recipe has adapters): the adapter's id, name and directory on
# the server
LORA_INPUTS = [
    TensorSpec(name="lora_id", dtype="uint64", dims=[1], optional=True),
    *[
        TensorSpec(name=f"lora_{k}", dtype="bytes", dims=[1], optional=True)
        for k in ("name", "path", "ckpt_source")
    ],
]
# the guide of guided decoding (declared with serving.guided_decoding): upstream's LLM-API model has
# none, these are the tensorrtllm backend's names, which the OpenAI frontend sends; they become
# SamplingParams.guided_decoding
GUIDE_INPUTS = [
    TensorSpec(name=n, dtype="bytes", dims=[1], optional=True)
    for n in ("guided_decoding_guide_type", "guided_decoding_guide")
]
# returned when a request sets sampling_param_return_perf_metrics (KV-cache blocks, timestamps,
# draft acceptance)
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
# Beyond upstream's llmapi template, from the LLM API itself (facts/llm_args.json request):
# SamplingParams.min_tokens, repetition_penalty, length_penalty, end_id, pad_id and bad (the
# ensemble's sampling inputs a client such as genai-perf --extra-inputs sends to <name>_openai), and
# the token counts of RequestOutput.prompt_token_ids / CompletionOutput.token_ids (newly generated
# in a streamed response), which the OpenAI frontend reads as usage
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
LORA_DIR = "lora"  # where the adapters live in the LLM-API model's version directory


def llm_inputs(r: LLMRecipe) -> list[TensorSpec]:
    """The LLM-API model's inputs: upstream's, min_tokens, its LoRA inputs with adapters, the guide
    with guided decoding."""
    return [
        *INPUTS,
        *EXT_INPUTS,
        *(LORA_INPUTS if r.lora is not None else []),
        *(GUIDE_INPUTS if r.serving.guided_decoding is not None else []),
    ]
