"""The TensorRT-LLM recipe (`backend: tensorrtllm`): a decoder-only checkpoint served by
TensorRT-LLM (engine + inflight batching, or the LLM-API Python model). The GPU and image tables its
rules read are the LLM layer's (backends/llm/gpus.py, backends/llm/images.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from tritonbuild.backends.llm.gpus import TargetGPU
from tritonbuild.backends.llm.images import TRTLLM_IMAGES
from tritonbuild.backends.tensorrtllm.quant import NAMES as QUANTIZATIONS
from tritonbuild.backends.tensorrtllm.recipe.lora import LoRA
from tritonbuild.backends.tensorrtllm.recipe.speculative import Speculative
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
from tritonbuild.triton.images import DEFAULT_TAG, default_image


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
        "rank holds it whole). Engine route only: true is refused on the LLM-API route "
        "(TorchLlmArgs has no such field).",
    )
    use_paged_context_fmha: bool = Field(
        True,
        description="Needed by KV block reuse and chunked context (trtllm-build "
        "--use_paged_context_fmha). Engine route only: false is refused on the LLM-API route "
        "(TorchLlmArgs has no such field).",
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
        "calibration; without it they download a Hugging Face dataset. LLM-API route: refused "
        "where no quantize.py runs (quantization: none, or a checkpoint already quantized)."
    )
    size: int = Field(32, ge=1, description="Calibration samples (quantize.py --calib_size).")


class Instances(Strict):
    preprocessing: int = Field(4, ge=1)
    postprocessing: int = Field(4, ge=1)
    bls: int = Field(1, ge=1)


class Executor(Strict):
    """The tensorrtllm C++ backend's executor knobs; defaults are the backend's own when the
    parameter is missing (model_instance_state.cc), so leaving them changes nothing."""

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


# executor knobs the LLM API also has (TorchLlmArgs fields of the same name): written to model.yaml
# when set
LLMAPI_EXECUTOR = ("iter_stats_max_iterations", "request_stats_max_iterations")


class GuidedDecoding(Strict):
    backend: Literal["xgrammar", "llguidance"] = Field(
        "xgrammar",
        description="engine route: the C++ backend's guided_decoding_backend (xgrammar only); "
        "LLM-API route: the LLM API's guided_decoding_backend (xgrammar or llguidance).",
    )


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
        True,
        description="Tokenizer adds BOS etc. to prompts (upstream default): the preprocessing "
        "model's parameter (engine route), every request's SamplingParams.add_special_tokens "
        "(LLM-API route).",
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
        TRTLLM_IMAGES[DEFAULT_TAG][0],
        description="TensorRT-LLM in the serving image; engines must match it.",
    )
    triton_image: str = Field(
        default_image("trtllm-python-py3"),
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
        description="engine: a TensorRT engine served by the tensorrtllm C++ backend; pytorch: "
        "TRT-LLM's LLM-API (PyTorch) python model with model.yaml, no engine build; auto: pytorch "
        "where the image's TensorRT-LLM and the recipe's quantization allow it, else engine "
        "('tritonbuild plan' says which and why).",
    )
    _route_why: str = PrivateAttr("")
    checkpoint: Checkpoint
    tokenizer: str | None = Field(
        None,
        description="Tokenizer directory (tokenizer.json, tokenizer_config.json); "
        "default: the checkpoint directory. Packaged on both routes: the preprocessing and "
        "postprocessing models' tokenizer (engine), model.yaml's tokenizer (LLM API).",
    )
    dtype: Literal["auto", "float16", "bfloat16"] = Field(
        "auto",
        description="Weights and activations: auto = the checkpoint's torch_dtype (float32 → "
        "float16), upstream's default in every converter, quantize.py and the LLM API.",
    )
    quantization: Literal[QUANTIZATIONS] = Field(
        "int4_weight_only",
        description="int4_weight_only / int8_weight_only / int8_sq[_per_channel][_per_token] "
        "(SmoothQuant, calibrated): a family converter, engine route; int4_awq / w4a8_awq / fp8 / "
        "nvfp4: ModelOpt's quantize.py (both routes); int4_gptq: a GPTQ checkpoint (engine "
        "route). A checkpoint already quantized must be named by its value.",
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
                f"speculative.mode {self.speculative.mode} needs engine.build_path: cli "
                "(trtllm-build --speculative_decoding_mode); the llmapi build path builds no "
                "speculative engine"
            )
        guided = self.serving.guided_decoding
        if guided is not None and guided.backend != "xgrammar" and runtime == "engine":
            return (
                f"serving.guided_decoding.backend {guided.backend} needs runtime: pytorch (the LLM "
                "API); the tensorrtllm C++ backend takes xgrammar only"
            )
        return None

    @property
    def route_why(self) -> str:
        return self._route_why
