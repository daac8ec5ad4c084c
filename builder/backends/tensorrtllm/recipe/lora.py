"""The TensorRT-LLM recipe's `lora` section: adapters served by name, the engine route's LoRA plugin
(trtllm-build) and the LLM-API route's LoraConfig, each key tied to the route that has it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tritonbuild.recipe.models import Strict

# trtllm-build --lora_target_modules choices: LoraManager.LORA_MODULE_IDS
# (tests/contracts/facts/trtllm_scripts.json)
LoraModule = Literal[
    "attn_qkv",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_dense",
    "mlp_h_to_4h",
    "mlp_4h_to_h",
    "mlp_gate",
    "cross_attn_qkv",
    "cross_attn_q",
    "cross_attn_k",
    "cross_attn_v",
    "cross_attn_dense",
    "moe_h_to_4h",
    "moe_4h_to_h",
    "moe_gate",
    "moe_router",
    "mlp_router",
    "mlp_gate_up",
]


class LoRA(Strict):
    adapters: dict[str, str] = Field(
        min_length=1,
        description="LoRA name (what the OpenAI frontend's model name "
        "<model><separator><name> selects) → a directory, content-hashed: engine route, "
        "TensorRT-LLM's model.lora_weights.npy and model.lora_config.npy; LLM-API "
        "route, a Hugging Face PEFT adapter (adapter_config.json + weights).",
    )
    cache_gpu_memory_fraction: float | None = Field(
        None,
        gt=0,
        le=1,
        description="lora_cache_gpu_memory_fraction (engine route; unset: the backend's default).",
    )
    cache_host_memory_bytes: int | None = Field(
        None,
        ge=0,
        description="lora_cache_host_memory_bytes (engine route; unset: the backend's default).",
    )
    max_lora_rank: int | None = Field(
        None,
        ge=1,
        description="The largest adapter rank served (unset: 64, the "
        "default of trtllm-build --max_lora_rank and LoraConfig.max_lora_rank); LLM-API "
        "route: an adapter of a larger rank is a plan error.",
    )
    target_modules: list[LoraModule] | None = Field(
        None,
        min_length=1,
        description="Engine route: the modules the "
        "LoRA plugin is built for (trtllm-build --lora_target_modules; "
        "unset: those the adapters' model.lora_config.npy name).",
    )
    build_adapter: str | None = Field(
        None,
        description="Engine route: a Hugging Face PEFT adapter directory whose "
        "adapter_config.json configures the plugin (trtllm-build --lora_dir); "
        "content-hashed into the engine step.",
    )
    max_loras: int | None = Field(
        None,
        ge=1,
        description="LLM-API route: adapters kept on the GPU at once "
        "(LoraConfig.max_loras; unset: the LLM API's default).",
    )
    max_cpu_loras: int | None = Field(
        None,
        ge=1,
        description="LLM-API route: adapters kept in host memory "
        "(LoraConfig.max_cpu_loras; unset: the LLM API's default).",
    )

    def route_problem(self, runtime: str) -> str | None:
        """The first key this route cannot honour, as a message naming the route that can."""
        engine_only = (
            "cache_gpu_memory_fraction",
            "cache_host_memory_bytes",
            "target_modules",
            "build_adapter",
        )
        llmapi_only = ("max_loras", "max_cpu_loras")
        wrong = [
            k
            for k in (engine_only if runtime != "engine" else llmapi_only)
            if getattr(self, k) is not None
        ]
        if not wrong:
            return None
        other = (
            "runtime: engine (the tensorrtllm C++ backend and trtllm-build's LoRA plugin)"
            if runtime != "engine"
            else "runtime: pytorch (the LLM API's LoraConfig)"
        )
        return f"lora.{wrong[0]} needs {other}; the {runtime} route has no such setting"
