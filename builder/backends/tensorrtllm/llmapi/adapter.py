"""<name>_openai: the Python model in front of the LLM-API model that takes the OpenAI frontend's
and genai-perf's request format (the ensemble's names and types) and asks the LLM-API model
(models/openai_adapter.py is what it runs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tritonbuild.backends.tensorrtllm.llmapi.tensors import EXT_OUTPUTS, GUIDE_INPUTS, LORA_DIR
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
from tritonbuild.recipe.models import TensorSpec

ADAPTER_PY = Path(__file__).parents[1] / "models" / "openai_adapter.py"
# <name>_openai: what Triton's OpenAI frontend and genai-perf send (the ensemble's names and types,
# upstream's inflight_batcher_llm ones) → the llmapi model's input it means
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
    # genai-perf's name for min_tokens (tensors.CLIENT_ALIASES)
    "min_length": "sampling_param_min_tokens",
    **{
        k: f"sampling_param_{k}"
        for k in ("repetition_penalty", "length_penalty", "end_id", "pad_id")
    },
    "bad_words": "sampling_param_bad",
}
# the ensemble's perf outputs the adapter returns, from the llmapi model's output of (mostly) the
# same name
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
# ask for num_input_tokens / num_output_tokens
COUNTS = ("return_num_input_tokens", "return_num_output_tokens")


# what the OpenAI frontend loads beside each LoRA name of multi_lora.json (and sends with a LoRA's
# first request); the LLM API reads the PEFT adapter itself from lora_path, so the adapter model
# drops these arrays
FRONTEND_LORA_FILES = {
    "model.lora_weights.npy": ("float16", (1, 1, 1)),
    "model.lora_config.npy": ("int32", (1, 1, 3)),
}


def adapter_inputs(r: LLMRecipe) -> list[TensorSpec]:
    """<name>_openai's inputs: the ensemble's names and types for what the clients send and the
    LLM-API model takes (the guide only with guided decoding, lora_task_id/weights/config only with
    adapters)."""
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
    """multi_lora.json beside <name>_openai (name → the frontend's .npy pair, relative to the
    repository; task ids from 1 in file order) and the adapter's table task id → LoRA name."""
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


def write_adapter(r: LLMRecipe, root: Path, pb2, loras: list[str]) -> str:
    """<name>_openai: the client-format front of the LLM-API model (see
    models/openai_adapter.py)."""
    from tritonbuild.triton.config import add_tensors, write_config

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
    write_config(root / name, mc)
    return name
