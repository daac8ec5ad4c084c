"""The TensorRT-LLM recipe (`backend: tensorrtllm`): a decoder-only checkpoint served by TensorRT-LLM (engine +
inflight batching, or the LLM-API Python model). The GPU and image tables its rules read are the LLM layer's
(backends/llm/gpus.py, backends/llm/images.py)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from tritonbuild.backends.llm.gpus import TargetGPU
from tritonbuild.backends.tensorrtllm.quant import NAMES as QUANTIZATIONS
from tritonbuild.backends.tensorrtllm.route import choose
from tritonbuild.recipe.models import (
    INT32_MAX,
    SCHEMA_VERSION,
    UINT32_MAX,
    UINT64_MAX,
    Checkpoint,
    Named,
    Strict,
    Verify,
)


class EngineLimits(Strict):
    max_batch_size: int = Field(64, ge=1, le=INT32_MAX)
    max_input_len: int = Field(1024, ge=1)
    max_seq_len: int = Field(2048, ge=2, description="Input + output tokens.")
    max_num_tokens: int = Field(8192, ge=1, description="Token budget per engine iteration.")
    max_beam_width: int = Field(1, ge=1)
    tp_size: int = Field(1, ge=1)
    pp_size: int = Field(1, ge=1)
    use_parallel_embedding: bool = Field(
        False,
        description="Split the input embedding over tp_size (converters' "
        "--use_parallel_embedding; upstream default: every "
        "rank holds it whole).",
    )
    use_paged_context_fmha: bool = Field(
        True, description="Needed by KV block reuse and chunked context."
    )
    logits_dtype: Literal["float16", "float32"] = "float32"
    build_path: Literal["cli", "llmapi"] = Field(
        "cli",
        description="cli: convert_checkpoint/quantize + "
        "trtllm-build; llmapi: LLM(build_config=...)",
    )
    timeout_s: int = Field(4 * 3600, ge=60)


class KVCache(Strict):
    type: Literal["paged"] = "paged"
    free_gpu_mem_fraction: float = Field(0.9, gt=0, le=1)
    enable_block_reuse: bool = Field(
        True, description="KV block reuse across requests (upstream default: on)."
    )
    tokens_per_block: Literal[8, 16, 32, 64, 128] = 32
    max_tokens: int | None = Field(
        None, ge=1, description="Cap on KV tokens (max_tokens_in_paged_kv_cache)."
    )
    dtype: Literal["auto", "fp8", "int8"] = Field("auto", description="auto = the model dtype.")
    host_memory_bytes: int = Field(
        0,
        ge=0,
        description="Host memory KV blocks are offloaded to (engine route; "
        "the backend's default 0 = no offload).",
    )
    onboard_blocks: bool = Field(
        True,
        description="Bring offloaded blocks back to the GPU for reuse (engine "
        "route; the backend's default).",
    )
    max_attention_window_size: list[Annotated[int, Field(ge=1)]] | None = Field(
        None,
        min_length=1,
        description="Sliding attention window per layer, repeated over the layers (unset: "
        "max_seq_len, upstream's default); LLM-API route: max_attention_window.",
    )
    sink_token_length: int | None = Field(
        None,
        ge=0,
        description="Tokens always kept at the start of the window "
        "(StreamingLLM; unset: upstream's default).",
    )


class Calibration(Strict):
    dataset: str = Field(
        description="Local calibration data (a directory or file, relative to the recipe) for "
        "ModelOpt's quantize.py (AWQ, FP8, KV cache) and the converters' int8 KV "
        "calibration; without it they download a Hugging Face dataset."
    )
    size: int = Field(32, ge=1, description="Calibration samples (quantize.py --calib_size).")


class Instances(Strict):
    preprocessing: int = Field(4, ge=1)
    postprocessing: int = Field(4, ge=1)
    bls: int = Field(1, ge=1)


class Executor(Strict):
    """The tensorrtllm C++ backend's executor knobs; defaults are the backend's own when the parameter is
    missing (model_instance_state.cc), so leaving them changes nothing."""

    gpu_weights_percent: float = Field(
        1.0,
        ge=0,
        le=1,
        description="Share of the weights kept on the GPU "
        "(weight streaming below 1; the engine must be built for it).",
    )
    multi_block_mode: bool = True
    enable_context_fmha_fp32_acc: bool = False
    cuda_graph_mode: bool = False
    cancellation_check_period_ms: int = Field(100, ge=1)
    stats_check_period_ms: int = Field(100, ge=1)
    iter_stats_max_iterations: int = Field(
        1000,
        ge=0,
        description="Iterations whose statistics are kept (the "
        "executor's kDefaultIterStatsMaxIterations); LLM-API route too.",
    )
    request_stats_max_iterations: int = Field(
        0,
        ge=0,
        description="Iterations whose per-request statistics are "
        "kept (0 = off, the executor's default); LLM-API route too.",
    )


# executor knobs the LLM API also has (TorchLlmArgs fields of the same name): written to model.yaml when set
LLMAPI_EXECUTOR = ("iter_stats_max_iterations", "request_stats_max_iterations")


class GuidedDecoding(Strict):
    backend: Literal["xgrammar", "llguidance"] = Field(
        "xgrammar",
        description="engine route: the C++ backend's guided_decoding_backend (xgrammar only); LLM-API "
        "route: the LLM API's guided_decoding_backend (xgrammar or llguidance).",
    )


# trtllm-build --lora_target_modules choices: LoraManager.LORA_MODULE_IDS (tests/contracts/facts/trtllm_scripts.json)
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


def lookahead_draft_len(window: int, ngram: int, verification: int) -> int:
    """The engine's max_draft_len a lookahead (W, N, G) needs: TensorRT-LLM's
    LookaheadDecodingConfig::calculateSpeculativeResourceTuple (facts/trtllm_speculative.json)."""
    return (0 if ngram == 1 else ngram - 2) + (window - 1 + verification) * (ngram - 1)


class DraftSpeculative(Strict):
    """Speculative decoding on the LLM-API route (runtime: pytorch): the LLM API's speculative_config."""

    mode: Literal["draft_target", "eagle"] = Field(
        description="draft_target: a smaller draft model proposes tokens "
        "(DraftTarget); eagle: an EAGLE head does (Eagle)."
    )
    max_draft_len: int = Field(
        ge=1, le=64, description="Draft tokens proposed per step (max_draft_len)."
    )
    draft_checkpoint: str = Field(
        description="The draft model's (or EAGLE head's) Hugging Face checkpoint "
        "directory, relative to the recipe; content-hashed, packaged."
    )

    def route_problem(self, runtime: str) -> str | None:
        if runtime == "engine":
            return (
                f"speculative needs runtime: pytorch for mode {self.mode} (the LLM API's speculative_config); on "
                "the engine route tritonbuild generates modes lookahead and medusa (no second engine)"
            )
        return None

    @property
    def draft_len(self) -> int:
        return self.max_draft_len


class EngineSpeculative(Strict):
    """A speculative mode only the engine route generates (no draft checkpoint of its own): route_problem names
    what it needs there (ENGINE_ONLY, per mode)."""

    ENGINE_ONLY: ClassVar[str]

    def route_problem(self, runtime: str) -> str | None:
        if runtime != "engine":
            return self.ENGINE_ONLY.format(runtime=runtime)
        return None

    @property
    def draft_checkpoint(self) -> None:
        return None


class LookaheadSpeculative(EngineSpeculative):
    """Lookahead decoding on the engine route: the model drafts its own n-grams, no extra checkpoint; the engine is
    built for max_draft_len = f(W, N, G) (TensorRT-LLM's formula) and the backend runs (W, N, G)."""

    mode: Literal["lookahead"]
    window_size: int = Field(ge=1, description="W, the Jacobi window (n-grams explored per step).")
    ngram_size: int = Field(
        ge=2,
        description="N, the n-gram size (1 drafts nothing: upstream's meaningful "
        "minimum is (2, 2, 1)).",
    )
    verification_set_size: int = Field(ge=0, description="G, the n-grams verified per step.")

    ENGINE_ONLY = (
        "speculative.mode lookahead needs runtime: engine (trtllm-build --speculative_decoding_mode "
        "lookahead_decoding, the backend's decoding_mode); tritonbuild generates none on the {runtime} "
        "route"
    )

    @property
    def draft_len(self) -> int:
        """max_draft_len as the engine is built with it."""
        return lookahead_draft_len(self.window_size, self.ngram_size, self.verification_set_size)


class MedusaSpeculative(EngineSpeculative):
    """Medusa heads on the engine route: examples/medusa/convert_checkpoint.py folds the heads into the TensorRT-LLM
    checkpoint, trtllm-build --speculative_decoding_mode medusa, the backend runs the medusa_choices tree."""

    mode: Literal["medusa"]
    heads_checkpoint: str = Field(
        description="The Medusa heads' directory (--medusa_model_dir), relative to the "
        "recipe; content-hashed into the engine step."
    )
    num_medusa_heads: int = Field(4, ge=1, description="--num_medusa_heads (upstream's default 4).")
    num_medusa_layers: int = Field(
        1, ge=1, description="--num_medusa_layers (upstream's default 1)."
    )
    max_draft_len: int = Field(
        63, ge=1, description="The engine's max_draft_len (--max_medusa_token_len)."
    )
    medusa_choices: list[list[int]] = Field(
        min_length=1,
        description="The token tree: each path a list of head "
        "top-k indices, e.g. [[0], [0, 0], [1]].",
    )

    @model_validator(mode="after")
    def _tree(self) -> MedusaSpeculative:
        if len(self.medusa_choices) > self.max_draft_len:
            raise ValueError(
                f"medusa_choices has {len(self.medusa_choices)} paths, more than max_draft_len "
                f"{self.max_draft_len} (one draft token per path)"
            )
        for path in self.medusa_choices:
            if not path or len(path) > self.num_medusa_heads or min(path) < 0:
                raise ValueError(
                    f"medusa_choices path {path}: 1 to num_medusa_heads ({self.num_medusa_heads}) "
                    "indices, each >= 0"
                )
        return self

    ENGINE_ONLY = (
        "speculative.mode medusa needs runtime: engine (examples/medusa/convert_checkpoint.py, "
        "trtllm-build --speculative_decoding_mode medusa); on the pytorch route use mode eagle or "
        "draft_target"
    )

    @property
    def draft_len(self) -> int:
        return self.max_draft_len


Speculative = Annotated[
    DraftSpeculative | LookaheadSpeculative | MedusaSpeculative, Field(discriminator="mode")
]


class Serving(Strict):
    streaming: bool = Field(
        False, description="Decoupled mode on tensorrt_llm (and BLS): tokens stream out."
    )
    batching_strategy: Literal["inflight_fused_batching", "inflight_batching", "V1"] = (
        "inflight_fused_batching"
    )
    scheduler_policy: Literal["guaranteed_no_evict", "max_utilization"] = "guaranteed_no_evict"
    bls: bool = Field(False, description="Also generate a BLS model (python) next to the ensemble.")
    instances: Instances = Field(default_factory=Instances)
    exclude_input_in_output: bool = Field(
        True,
        description="Default for requests that do not say: the answer "
        "holds the completion only. The OpenAI frontend sends it "
        "only with echo (chat never), genai-perf and triton_cli "
        "send true; false echoes the prompt first.",
    )
    add_special_tokens: bool = Field(
        True, description="Tokenizer adds BOS etc. to prompts (upstream default)."
    )
    enable_chunked_context: bool = False
    guided_decoding: GuidedDecoding | None = Field(
        None,
        description="JSON/regex/grammar-constrained output (the OpenAI frontend's tool_choice and "
        "response_format); declares the guide inputs. Engine route: the xgrammar tokenizer info is "
        "generated at build; LLM-API route: the LLM API's guided_decoding_backend.",
    )
    gpu_device_ids: list[int] = Field(default_factory=lambda: [0])
    max_queue_delay_us: int = Field(0, ge=0, le=UINT64_MAX)
    max_queue_size: int = Field(0, ge=0, le=UINT32_MAX)
    repository_mount: str = Field(
        "/models",
        description="Absolute path where the server sees this repository "
        "(the C++ backend needs an absolute engine path).",
    )

    @field_validator("repository_mount")
    @classmethod
    def _abs(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(
                "must be an absolute path (the tensorrtllm backend reads gpt_model_path verbatim)"
            )
        return v.rstrip("/") or "/"


class ImageShips(Strict):
    tensorrt_llm: str = Field(description="TensorRT-LLM version the image ships.")
    tensorrt: str | None = None
    cuda: str | None = None


class Image(Strict):
    trtllm_version: str = Field(
        "1.1.0", description="TensorRT-LLM in the serving image; engines must match it."
    )
    triton_image: str = Field(
        "nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3",
        description="NGC trtllm-python-py3 tags are checked against their TensorRT-LLM version; "
        "another image (e.g. built with tensorrtllm_backend's Dockerfile) is "
        "taken at its trtllm_version.",
    )
    ships: ImageShips | None = Field(
        None,
        description="For an NGC tag newer than tritonbuild's image table: what "
        "it ships, from Triton's Release Compatibility Matrix.",
    )


class LLMRecipe(Named):
    """A TensorRT-LLM model group: <name> (ensemble), <name>_preprocessing, <name>_tensorrt_llm,
    <name>_postprocessing and optionally <name>_bls."""

    schema_version: Literal[1] = SCHEMA_VERSION
    backend: Literal["tensorrtllm"]
    runtime: Literal["auto", "engine", "pytorch"] = Field(
        "auto",
        description="engine: a TensorRT engine served by the tensorrtllm C++ backend; pytorch: TRT-LLM's "
        "LLM-API (PyTorch) python model with model.yaml, no engine build; auto: pytorch where "
        "the image's TensorRT-LLM and the recipe's quantization allow it, else engine "
        "('tritonbuild plan' says which and why).",
    )
    _route_why: str = PrivateAttr("")
    checkpoint: Checkpoint
    tokenizer: str | None = Field(
        None,
        description="Tokenizer directory (tokenizer.json, tokenizer_config.json); "
        "default: the checkpoint directory.",
    )
    dtype: Literal["auto", "float16", "bfloat16"] = Field(
        "auto",
        description="Weights and activations: auto = the checkpoint's torch_dtype (float32 → float16), "
        "upstream's default in every converter, quantize.py and the LLM API.",
    )
    quantization: Literal[QUANTIZATIONS] = Field(
        "int4_weight_only",
        description="int4_weight_only / int8_weight_only / int8_sq[_per_channel][_per_token] "
        "(SmoothQuant, calibrated): a family converter, engine route; int4_awq / w4a8_awq / fp8 / nvfp4: ModelOpt's "
        "quantize.py (both routes); int4_gptq: a GPTQ checkpoint (engine route). A checkpoint already quantized "
        "must be named by its value.",
    )
    engine: EngineLimits = Field(default_factory=EngineLimits)
    kv_cache: KVCache = Field(default_factory=KVCache)
    calibration: Calibration | None = None
    lora: LoRA | None = None
    executor: Executor = Field(default_factory=Executor, description="Engine route only.")
    speculative: Speculative | None = Field(
        None,
        description="Speculative decoding: draft_target / eagle on the "
        "LLM-API route, lookahead and medusa on the engine route.",
    )
    serving: Serving = Field(default_factory=Serving)
    image: Image = Field(default_factory=Image)
    gpu: TargetGPU = "H200"
    verify: Verify = Field(default_factory=Verify)

    @model_validator(mode="after")
    def _route(self) -> LLMRecipe:
        runtime, self._route_why = choose(
            self.runtime,
            self.quantization,
            self.kv_cache.dtype,
            self.image,
            self.speculative.mode if self.speculative else None,
        )
        object.__setattr__(self, "runtime", runtime)  # NOTE: frozen; auto is resolved once, at load
        offload = {"host_memory_bytes", "onboard_blocks"} & self.kv_cache.model_fields_set
        executor = sorted(self.executor.model_fields_set - set(LLMAPI_EXECUTOR))
        if runtime != "engine" and (executor or offload):
            key = f"executor.{executor[0]}" if executor else f"kv_cache.{sorted(offload)[0]}"
            raise ValueError(
                f"{key} sets the tensorrtllm C++ backend's parameters: it needs runtime: engine, "
                f"the {runtime} route has none of them"
            )
        if (problem := self._feature_route_problem(runtime)) is not None:
            raise ValueError(problem)
        return self

    def _feature_route_problem(self, runtime: str) -> str | None:
        """LoRA, speculative decoding and guided decoding keys the chosen route cannot honour."""
        if self.lora is not None and (problem := self.lora.route_problem(runtime)) is not None:
            return problem
        if self.lora is not None and runtime == "engine" and self.engine.build_path != "cli":
            return (
                "lora on the engine route needs engine.build_path: cli (trtllm-build --lora_plugin)"
            )
        if (
            self.speculative is not None
            and (problem := self.speculative.route_problem(runtime)) is not None
        ):
            return problem
        if self.speculative is not None and runtime == "engine" and self.engine.build_path != "cli":
            return (
                f"speculative.mode {self.speculative.mode} needs engine.build_path: cli (trtllm-build "
                "--speculative_decoding_mode); the llmapi build path builds no speculative engine"
            )
        guided = self.serving.guided_decoding
        if guided is not None and guided.backend != "xgrammar" and runtime == "engine":
            return (
                f"serving.guided_decoding.backend {guided.backend} needs runtime: pytorch (the LLM API); the "
                "tensorrtllm C++ backend takes xgrammar only"
            )
        return None

    @property
    def route_why(self) -> str:
        return self._route_why
