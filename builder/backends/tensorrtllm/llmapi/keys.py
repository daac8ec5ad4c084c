"""What the LLM-API route (runtime: pytorch) does with the recipe keys the engine route hands the
tensorrtllm C++ backend or its own Triton models: each has its LLM-API equivalent in model.yaml
(`llm_api_args`: TorchLlmArgs fields and SchedulerConfig, recorded in
tests/contracts/facts/llm_args.json route_keys), or the generated model's
(`serving.exclude_input_in_output` as the default of requests that do not say;
`serving.gpu_device_ids` as one instance per group of tp_size × pp_size GPUs, upstream's
multi-instance LLM-API model), or is refused at plan (`route_problems`) naming what to use instead.
None is dropped. The keys both routes read are honoured elsewhere: `tokenizer` and
`serving.add_special_tokens` in model.yaml (emit.py), `calibration` by the trtllm.quantize step
or refused where none is planned (plan.py)."""

from __future__ import annotations

from tritonbuild.backends.tensorrtllm.recipe.model import (
    EngineLimits,
    Instances,
    LLMRecipe,
    Serving,
)

# recipe key → the TorchLlmArgs field of the same meaning
LLM_API_FIELDS = {
    ("engine", "max_beam_width"): "max_beam_width",
    ("engine", "max_input_len"): "max_input_len",
    ("serving", "enable_chunked_context"): "enable_chunked_prefill",
}
# serving.scheduler_policy → SchedulerConfig.capacity_scheduler_policy (a CapacitySchedulerPolicy
# value)
SCHEDULER_POLICIES = {
    "guaranteed_no_evict": "GUARANTEED_NO_EVICT",
    "max_utilization": "MAX_UTILIZATION",
}
ROUTE = "runtime: pytorch (the LLM-API model)"
ENGINE = "use runtime: engine, where the tensorrtllm C++ backend takes it"
# key → (why the LLM-API route has no such setting, what to do instead); refused where the value is
# not the default
REFUSED = {
    ("serving", "batching_strategy"): (
        "the LLM API's PyTorch backend batches in flight and has no batching type "
        "(TorchLlmArgs has no batching_type)",
        f"remove the key, or {ENGINE}",
    ),
    ("serving", "max_queue_delay_us"): (
        "the LLM-API model (max_batch_size 0) has no Triton dynamic batcher to "
        "queue in; the LLM API queues requests itself",
        f"remove the key, or {ENGINE}",
    ),
    ("serving", "max_queue_size"): (
        "the LLM-API model (max_batch_size 0) has no Triton dynamic batcher, so no "
        "queue policy; the LLM API queues requests itself",
        f"remove the key, or {ENGINE}",
    ),
    ("serving", "bls"): (
        "the LLM-API route generates no BLS model: the LLM-API model and <name>_openai are its "
        "entry points",
        "remove serving.bls, or use runtime: engine",
    ),
    ("serving", "instances", "preprocessing"): (
        "the LLM-API route has no preprocessing model (the LLM API tokenizes)",
        "remove the key, or use runtime: engine",
    ),
    ("serving", "instances", "postprocessing"): (
        "the LLM-API route has no postprocessing model (the LLM API detokenizes)",
        "remove the key, or use runtime: engine",
    ),
    ("serving", "instances", "bls"): ("the LLM-API route generates no BLS model", "remove the key"),
    ("engine", "logits_dtype"): (
        "no engine is built on the LLM-API route (trtllm-build's --logits_dtype)",
        "remove the key, or use runtime: engine",
    ),
    ("engine", "build_path"): (
        "no engine is built on the LLM-API route",
        "remove the key, or use runtime: engine",
    ),
    # TorchLlmArgs (1.x and main, facts/llm_args.json) has no field of either name: they are
    # convert_checkpoint.py's --use_parallel_embedding and trtllm-build's --use_paged_context_fmha
    # (facts/trtllm_scripts.json), neither of which runs on this route
    ("engine", "use_parallel_embedding"): (
        "TorchLlmArgs has no use_parallel_embedding: it is the converters' "
        "--use_parallel_embedding, and the LLM-API route runs no converter",
        "remove the key, or use runtime: engine",
    ),
    ("engine", "use_paged_context_fmha"): (
        "TorchLlmArgs has no use_paged_context_fmha: it is trtllm-build's "
        "--use_paged_context_fmha, and no engine is built on the LLM-API route",
        "remove the key, or use runtime: engine",
    ),
}
DEFAULTS = {"serving": Serving(), "engine": EngineLimits(), "instances": Instances()}


def _value(owner, key: tuple[str, ...]):
    for part in key:
        owner = getattr(owner, part)
    return owner


def _default(key: tuple[str, ...]):
    return (
        _value(DEFAULTS["instances"], key[2:])
        if key[1] == "instances"
        else _value(DEFAULTS[key[0]], key[1:])
    )


def llm_api_args(r: LLMRecipe) -> dict:
    """model.yaml's LLM() arguments for the recipe keys that have an LLM-API equivalent."""
    out = {field: _value(r, key) for key, field in LLM_API_FIELDS.items()}
    out["scheduler_config"] = {
        "capacity_scheduler_policy": SCHEDULER_POLICIES[r.serving.scheduler_policy]
    }
    return out


def instance_groups(r: LLMRecipe) -> list[list[int]]:
    """serving.gpu_device_ids as the LLM-API model's instances: one per tp_size × pp_size GPUs, in
    order."""
    world, ids = r.engine.tp_size * r.engine.pp_size, r.serving.gpu_device_ids
    return [ids[i : i + world] for i in range(0, len(ids), world)]


def route_problems(r: LLMRecipe) -> list[tuple]:
    """(key path, message, hint) for each key set to what the LLM-API route cannot do."""
    if r.runtime != "pytorch":
        return []
    return [
        (
            key,
            f"{_value(r, key)!r} has no effect on {ROUTE}: {why}",
            hint.replace("the key", ".".join(key)),
        )
        for key, (why, hint) in REFUSED.items()
        if _value(r, key) != _default(key)
    ]
