"""The tensors of the TensorRT-LLM model group's configs: upstream's names, dtypes and shapes
(tensorrtllm_backend inflight_batcher_llm templates, recorded in tests/contracts/facts), which
request input feeds which tensorrt_llm input, and what the recipe turns on."""

from __future__ import annotations

from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe

LOGITS_TYPE = {"float32": "TYPE_FP32", "float16": "TYPE_FP16"}


# Optional request inputs of the ensemble and the BLS (upstream names, dtypes, dims), and the
# tensorrt_llm input each one feeds. The ensemble input is the key; None = handled by preprocessing
# (text → token ids).
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
# request inputs upstream's ensemble and tensorrt_llm templates (not its BLS) declare with
# allow_ragged_batch; they are the guide of guided decoding, declared only where the recipe turns it
# on (else a guided request is a 400 at the door instead of an error from a backend with no
# guided-decoding config)
RAGGED = GUIDE_INPUTS = ("guided_decoding_guide_type", "guided_decoding_guide")
# a LoRA's inputs, declared where the recipe has adapters (name, dtype, dims, ragged everywhere)
LORA_INPUTS = [
    ("lora_task_id", "TYPE_UINT64", [1], False),
    ("lora_weights", "TYPE_FP16", [-1, -1], True),
    ("lora_config", "TYPE_INT32", [-1, 3], True),
]
# Inputs a recorded client sends that upstream's templates lack, and the upstream input each one
# means: genai-perf --output-tokens-mean-deterministic sends min_length (tensorrtllm_converter.py).
# The ensemble routes min_tokens and min_length through preprocessing (a model input takes one
# source); the BLS forwards the first.
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
# tensorrt_llm outputs passed straight to the ensemble's outputs (besides the tokens → text_output
# path)
PASSTHROUGH_OUTPUTS = [
    ("cum_log_probs", "TYPE_FP32", [-1]),
    ("output_log_probs", "TYPE_FP32", [-1, -1]),
    ("batch_index", "TYPE_INT32", [1]),
    ("sequence_index", "TYPE_INT32", [1]),
    ("num_input_tokens", "TYPE_INT32", [1]),
    ("num_output_tokens", "TYPE_INT32", [1]),
]
LOGITS_OUTPUTS = [("context_logits", [-1, -1]), ("generation_logits", [-1, -1, -1])]
# tensorrt_llm outputs returned when the request sets return_perf_metrics: KV-cache block counts,
# the request's timestamps, speculative-decoding acceptance; passed straight to the ensemble's and
# the BLS's outputs
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
# NOTE: upstream's BLS template (alone) reshapes these to scalars
BLS_SCALARS = (
    "return_log_probs",
    "return_context_logits",
    "return_generation_logits",
    "num_return_sequences",
    "return_perf_metrics",
    "lora_task_id",
)


def request_inputs(r: LLMRecipe) -> list[tuple[str, str, list[int], str | None]]:
    """REQUEST_INPUTS this recipe declares: the guide inputs only with serving.guided_decoding."""
    guided = r.serving.guided_decoding is not None
    return [i for i in REQUEST_INPUTS if guided or i[0] not in GUIDE_INPUTS]


def logits_type(engine: dict) -> str:
    """The Triton type of the engine's logits outputs (upstream's ${logits_datatype})."""
    return LOGITS_TYPE[engine["pretrained_config"].get("logits_dtype", "float32")]
