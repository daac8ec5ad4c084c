"""The vLLM recipe (`backend: vllm`): the checkpoint, typed engine args (`VLLMEngineArgs`, written
to model.json), LoRA, quantize and speculative decoding (their types in `vllm/lora.py`,
`vllm/quantize/step.py`, `vllm/speculative.py`), the serving image and how the server runs it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue, field_validator

from tritonbuild.backends.llm.gpus import TargetGPU
from tritonbuild.backends.vllm.lora import VLLMLoRA
from tritonbuild.backends.vllm.quantize.step import VLLMQuantize
from tritonbuild.backends.vllm.speculative import VLLMSpeculative
from tritonbuild.backends.vllm.versions import ALL as QUANTIZATION_METHODS
from tritonbuild.recipe.models import SCHEMA_VERSION, Checkpoint, Named, Strict, Verify
from tritonbuild.triton.images import default_image


class VLLMRecipe(Named):
    """A vLLM-backend model: config.pbtxt (KIND_MODEL, decoupled, max_batch_size 0) + 1/model.json."""

    schema_version: Literal[1] = SCHEMA_VERSION
    backend: Literal["vllm"]
    checkpoint: Checkpoint
    engine_args: VLLMEngineArgs = Field(default_factory=lambda: VLLMEngineArgs())
    lora: VLLMLoRA | None = None
    # the vllm.quantize step; None: the checkpoint packaged as it is
    quantize: VLLMQuantize | None = None
    speculative: VLLMSpeculative | None = Field(
        None, description="Speculative decoding (model.json's speculative_config)."
    )
    serving: VLLMServing = Field(default_factory=lambda: VLLMServing())
    image: VLLMImage = Field(default_factory=lambda: VLLMImage())
    gpu: TargetGPU = "H200"
    verify: Verify = Field(default_factory=Verify)


class VLLMEngineArgs(Strict):
    """Typed subset of vLLM's AsyncEngineArgs; written to model.json as is."""

    dtype: Literal["auto", "float16", "bfloat16", "float32"] = "auto"
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    tensor_parallel_size: int = Field(1, ge=1)
    pipeline_parallel_size: int = Field(1, ge=1)
    max_model_len: int | None = Field(None, ge=1)
    max_num_seqs: int | None = Field(None, ge=1)
    enforce_eager: bool = False
    enable_prefix_caching: bool | None = Field(
        None,
        description="None: the image's vLLM's default (on; off in "
        "the 24.12 and 25.01 images' vLLM 0.5.5 / 0.6.3.post1).",
    )
    block_size: Literal[8, 16, 32, 64, 128] = Field(
        16,
        description="Tokens per paged-KV block (vLLM's "
        "CacheConfig.block_size; 16 is its CUDA default).",
    )
    quantization: Literal[QUANTIZATION_METHODS] | None = Field(
        None,
        description="vLLM's quantization method, one the image's vLLM has (its "
        "QuantizationMethods); must be the checkpoint's quantization_config.quant_method "
        "(compressed-tensors for a W4A16 pack-quantized INT4 checkpoint); None: vLLM reads it "
        "from config.json.",
    )
    seed: int = 0
    extra: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="Any other AsyncEngineArgs field of the image's vLLM (e.g. kv_cache_dtype, "
        "max_num_batched_tokens, enable_chunked_prefill, served_model_name), written into "
        "model.json as given; not a typed field above, nor one tritonbuild writes (model, LoRA's, "
        "speculative_config).",
    )


TYPED_ENGINE_ARGS = frozenset(VLLMEngineArgs.model_fields) - {"extra"}


class VLLMImage(Strict):
    triton_image: str = Field(
        default_image("vllm-python-py3"),
        description="Serving image with Triton's vLLM backend (the *-vllm-python-py3 tags; "
        "the trtllm images do not ship it).",
    )

    @field_validator("triton_image")
    @classmethod
    def _vllm_backend(cls, v: str) -> str:
        if v.startswith("nvcr.io/nvidia/tritonserver:") and not v.endswith("-vllm-python-py3"):
            raise ValueError(
                f"{v} has no vLLM backend: use a tritonserver:<tag>-vllm-python-py3 image"
            )
        return v


class VLLMServing(Strict):
    repository_mount: str = Field(
        "/models",
        description="Where the server sees this repository; model.json "
        "points at the packaged weights under it.",
    )
    determinism: Literal["default", "invariant"] = Field(
        "default",
        description="invariant: an answer never depends on the other requests in flight (fp16 and "
        "INT4 weight-only): the server runs vLLM's batch-invariant mode (VLLM_BATCH_INVARIANT=1) "
        "with tritonbuild's batch-invariant W4A16 plugin, shipped in the version directory "
        "(plugins/) and installed by serve, Dockerfile.triton and deploy-snippets. Slower: see "
        "README. default: vLLM's fastest kernels, whose bits depend on the batch. What it takes: "
        "docs reference/vllm-invariance.md.",
    )
    allow_unmeasured: bool = Field(
        False,
        description="With determinism: invariant, let plan take the settings the invariance table "
        "refuses only because no GPU record measured them (tensor/pipeline parallel, speculative "
        "decoding, a KV cache dtype, an attention backend or GPU not measured): to make that "
        "record; verify under load says whether they hold. Settings known to break invariance "
        "stay refused.",
    )


VLLMRecipe.model_rebuild()
