"""vLLM backend: the checkpoint packaged in the version directory, model.json with typed engine args,
config.pbtxt as the vLLM backend expects it (decoupled, max_batch_size 0, KIND_MODEL)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import Field, JsonValue, field_validator

from tritonbuild.backends import _vllm_invariant
from tritonbuild.backends import _vllm_quantize_step as quant
from tritonbuild.backends._vllm_extra import extra_problems
from tritonbuild.backends._vllm_lora import VLLMLoRA, lora_step, rank_problem
from tritonbuild.backends._vllm_quantization import ALL as QUANTIZATION_METHODS
from tritonbuild.backends._vllm_quantization import (
    checkpoint_methods,
    engine_args_problems,
    quantization_problem,
)
from tritonbuild.backends._vllm_rules import load_problems
from tritonbuild.backends._vllm_speculative import (
    VLLMSpeculative,
    draft_dir,
    draft_kv_config,
    draft_step,
    speculative_config,
    speculative_problem,
)
from tritonbuild.backends.base import Backend, PlanContext, StepContext
from tritonbuild.backends.common import copy_inputs
from tritonbuild.backends.llm.checkpoint import read_checkpoint, recipe_dir
from tritonbuild.backends.llm.gpus import GPU_MEMORY_MIB, TargetGPU
from tritonbuild.backends.llm.memory import (
    GIB,
    Architecture,
    MemoryPlan,
    kv_bytes_per_token,
    model_weight_bytes,
    tp_heads_problem,
)
from tritonbuild.core.hashing import pretty_json, sha256_json
from tritonbuild.core.stores import is_url
from tritonbuild.errors import PlanError, RecipeError
from tritonbuild.recipe.load import LoadedRecipe
from tritonbuild.recipe.models import SCHEMA_VERSION, Checkpoint, Named, Strict, TensorSpec, Verify

NAME = "vllm"
DEFAULT_FILENAME = "model.json"
# What Worker.determine_available_memory takes beyond the weights before the KV cache: the profiling run's
# activations and the CUDA/NCCL context growth (measured on the H200: docs/runs/2026-12-01-vllm-h200.json).
VLLM_RUNTIME_RESERVE = int(1.5 * (1 << 30))
GOLDEN_MAX_TOKENS = 16
GOLDEN_PROMPTS = [
    "Triton serves models from",
    "The engine is built once and",
    "Paged KV cache blocks hold",
    "A golden inference is compared",
    "INT4 weight-only quantization keeps",
    "tritonbuild turns recipes",
    "Every sequence has",
    "The repository holds",
]
# Every tensor the vLLM backend declares (vllm_backend src/model.py, recorded in tests/contracts): written out, so
# the manifest and verify know the whole interface and a server with --disable-auto-complete-config takes the
# OpenAI frontend's requests (return_num_*_tokens, return_logprobs, ...).
INPUTS = [
    TensorSpec(name="text_input", dtype="bytes", dims=[1]),
    TensorSpec(name="image", dtype="bytes", dims=[-1], optional=True),
    TensorSpec(name="stream", dtype="bool", dims=[1], optional=True),
    TensorSpec(name="sampling_parameters", dtype="bytes", dims=[1], optional=True),
    *[
        TensorSpec(name=n, dtype="bool", dims=[1], optional=True)
        for n in (
            "exclude_input_in_output",
            "return_finish_reason",
            "return_cumulative_logprob",
            "return_logprobs",
            "return_num_input_tokens",
            "return_num_output_tokens",
        )
    ],
    TensorSpec(name="embedding_request", dtype="bytes", dims=[1], optional=True),
]
OUTPUTS = [
    TensorSpec(name="text_output", dtype="bytes", dims=[-1]),
    TensorSpec(name="finish_reason", dtype="bytes", dims=[-1]),
    TensorSpec(name="cumulative_logprob", dtype="fp32", dims=[-1]),
    TensorSpec(name="logprobs", dtype="bytes", dims=[-1]),
    TensorSpec(name="num_input_tokens", dtype="uint32", dims=[1]),
    TensorSpec(name="num_output_tokens", dtype="uint32", dims=[-1]),
]


class VLLMRecipe(Named):
    """A vLLM-backend model: config.pbtxt (KIND_MODEL, decoupled, max_batch_size 0) + 1/model.json."""

    schema_version: Literal[1] = SCHEMA_VERSION
    backend: Literal["vllm"]
    checkpoint: Checkpoint
    engine_args: VLLMEngineArgs = Field(default_factory=lambda: VLLMEngineArgs())
    lora: VLLMLoRA | None = None
    quantize: quant.VLLMQuantize | None = (
        None  # the vllm.quantize step; None: the checkpoint packaged as it is
    )
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
        description="vLLM's quantization method, one the image's vLLM has (its QuantizationMethods); must be "
        "the checkpoint's quantization_config.quant_method (compressed-tensors for a W4A16 "
        "pack-quantized INT4 checkpoint); None: vLLM reads it from config.json.",
    )
    seed: int = 0
    extra: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="Any other AsyncEngineArgs field of the image's vLLM (e.g. kv_cache_dtype, "
        "max_num_batched_tokens, enable_chunked_prefill, served_model_name), written into model.json as given; "
        "not a typed field above, nor one tritonbuild writes (model, LoRA's, speculative_config).",
    )


TYPED_ENGINE_ARGS = frozenset(VLLMEngineArgs.model_fields) - {"extra"}


class VLLMImage(Strict):
    triton_image: str = Field(
        "nvcr.io/nvidia/tritonserver:25.12-vllm-python-py3",
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
        description="invariant: an answer never depends on the other requests in flight (fp16 and INT4 "
        "weight-only): the server runs vLLM's batch-invariant mode (VLLM_BATCH_INVARIANT=1) "
        "with tritonbuild's batch-invariant W4A16 plugin, shipped in the version directory "
        "(plugins/) and installed by serve, Dockerfile.triton and deploy-snippets. Slower: "
        "see README. default: vLLM's fastest kernels, whose bits depend on the batch.",
    )


VLLMRecipe.model_rebuild()


def plan_steps(loaded: LoadedRecipe, ctx: PlanContext) -> list[tuple[str, dict, dict[str, str]]]:
    ckpt, config, files = read_checkpoint(loaded, ctx)
    tp = loaded.recipe.engine_args.tensor_parallel_size
    if (heads := tp_heads_problem(Architecture.from_hf_config(config), tp)) is not None:
        raise RecipeError(
            f"engine_args.tensor_parallel_size: {heads}",
            where=loaded.where(("engine_args", "tensor_parallel_size")),
            hint="pick a tensor_parallel_size that divides the heads, or use pipeline_parallel_size",
        )
    if not (ckpt / "tokenizer.json").is_file() and not (ckpt / "tokenizer_config.json").is_file():
        raise PlanError(
            f"{ckpt} has no tokenizer files",
            where=loaded.where(("checkpoint", "path")),
            hint="save the tokenizer into the checkpoint directory (vLLM loads it from there)",
        )

    weights = (
        quant.quantize_step(loaded, ckpt, config, files)
        if loaded.recipe.quantize
        else (
            "vllm.package",
            {"layout": sorted(files)},
            {str(ckpt / k): v for k, v in files.items()},
        )
    )  # what is packaged
    _check_quantization(loaded, config)
    return [weights, *lora_step(loaded, ctx, recipe_dir), *draft_step(loaded, ctx, recipe_dir)]


def _check_quantization(loaded: LoadedRecipe, config: dict) -> None:
    """vLLM refuses a `quantization` other than the checkpoint's quant_method at load (ModelConfig.
    _verify_quantization, recorded in tests/contracts): say so at plan time, naming both sides."""
    wanted = loaded.recipe.engine_args.quantization
    method = (config.get("quantization_config") or {}).get("quant_method")
    image = loaded.recipe.image.triton_image
    if (
        wanted is not None
        and method is not None
        and wanted not in checkpoint_methods(method, image)
    ):
        raise PlanError(
            f"engine_args.quantization is {wanted!r} but the checkpoint's config.json says "
            f"quant_method {method!r}: vLLM refuses the load",
            hint=f"set quantization: {method} (or leave it out: vLLM reads it from config.json)",
            where=loaded.where(("engine_args", "quantization")),
        )
    if wanted is not None and method is None and loaded.recipe.quantize is None:
        raise PlanError(
            f"engine_args.quantization is {wanted!r} but the checkpoint has no quantization_config: "
            "vLLM quantizes only checkpoints written in that format",
            hint="point checkpoint.path at the quantized checkpoint, or remove engine_args.quantization",
            where=loaded.where(("engine_args", "quantization")),
        )


def weight_bytes_on_disk(ckpt: Path) -> int:
    """Bytes of the checkpoint's safetensors: what vLLM puts on the GPU for a dense or pre-quantized checkpoint."""
    return sum(f.stat().st_size for f in ckpt.glob("*.safetensors"))


def memory_plan(
    recipe: VLLMRecipe, config: dict, weights: int | None = None, draft: dict | None = None
) -> dict:
    """vLLM's KV budget (Worker.determine_available_memory): gpu_memory_utilization × the GPU's memory, less the
    weights and what the profiling run adds (activations of max_num_batched_tokens, CUDA/NCCL context), split
    into blocks of block_size tokens × layers × 2 × kv_heads × head_dim × dtype bytes; draft: the drafter's
    config.json, whose attention layers take KV in the same blocks (split across GPUs as the target's)."""
    arch = Architecture.from_hf_config(config)
    e = recipe.engine_args
    params, computed = model_weight_bytes(arch)
    wbytes = computed if weights is None else weights
    gpu = GPU_MEMORY_MIB[recipe.gpu] * (1 << 20)
    kv_dtype = "fp8" if str(e.extra.get("kv_cache_dtype", "auto")).startswith("fp8") else "auto"
    drafter = [(Architecture.from_hf_config(draft), "auto")] if draft is not None else []
    # one GPU's KV per token (what the blocks are cut by), and the whole model's (the plan's kv_bytes_per_token, as
    # on the TensorRT-LLM routes)
    kv_tok = sum(
        kv_bytes_per_token(a, d, e.tensor_parallel_size, e.pipeline_parallel_size)
        for a, d in [(arch, kv_dtype), *drafter]
    )
    kv_whole = sum(kv_bytes_per_token(a, d) for a, d in [(arch, kv_dtype), *drafter])
    w_gpu = -(-wbytes // (e.tensor_parallel_size * e.pipeline_parallel_size))
    pool = max(0, int(gpu * e.gpu_memory_utilization) - w_gpu - VLLM_RUNTIME_RESERVE)
    blocks = pool // (kv_tok * e.block_size)
    seq = e.max_model_len or arch.max_position_embeddings or 0
    seqs = blocks // -(-seq // e.block_size) if seq else 0
    notes = (
        []
        if pool
        else [
            f"weights ({w_gpu / GIB:.2f} GiB) and vLLM's reserve exceed gpu_memory_utilization "
            f"{e.gpu_memory_utilization} of the {recipe.gpu}"
        ]
    )
    plan = MemoryPlan(
        gpu=recipe.gpu,
        gpu_bytes=gpu,
        quantization=model_json(recipe).get("quantization", "none"),
        params=params,
        weight_bytes=wbytes,
        weight_bytes_per_gpu=w_gpu,
        kv_bytes_per_token=kv_whole,
        kv_bytes_per_token_per_gpu=kv_tok,
        kv_pool_bytes_per_gpu=pool,
        max_kv_tokens=blocks * e.block_size,
        max_sequences_at_max_seq_len=seqs,
        fits=pool > 0,
        notes=notes,
    )
    return {**plan.model_dump(), "block_size": e.block_size, "kv_blocks": blocks}


def describe(loaded: LoadedRecipe, ctx: PlanContext | None = None) -> dict:
    """Plan extras: vLLM's KV blocks on the recipe's GPU (from config.json and the safetensors' sizes)."""
    if is_url(loaded.recipe.checkpoint.path):
        return {}
    ckpt = recipe_dir(loaded, loaded.recipe.checkpoint.path, ("checkpoint", "path"))
    try:
        config = json.loads((ckpt / "config.json").read_text())
        arch = Architecture.from_hf_config(config)
    except (OSError, ValueError, KeyError):
        return {}
    draft = draft_dir(loaded, recipe_dir)  # its weights share the GPU with the model's
    draft_bytes = weight_bytes_on_disk(draft) if draft else 0
    weights = (quant.weight_bytes(loaded.recipe, ckpt, weight_bytes_on_disk) + draft_bytes) or None
    plan = memory_plan(loaded.recipe, config, weights, draft_kv_config(loaded, draft))
    return {"architecture": arch.model_dump(), "memory_plan": plan}


def golden_inputs(model) -> list[dict]:
    """The requests verify sends and records: for each prompt, the input set Triton's OpenAI frontend sends a
    vLLM model (tests/contracts/facts/clients.json), not streamed and streamed, greedy, with the log-probs of
    the chosen tokens, so goldens pin token ids and log-probs bit for bit."""
    import numpy as np

    params = json.dumps(
        {"temperature": 0, "max_tokens": GOLDEN_MAX_TOKENS, "logprobs": 0, "ignore_eos": True},
        sort_keys=True,
    )
    samples = []
    for prompt in GOLDEN_PROMPTS[: model.verify.samples]:
        for stream in (False, True):
            samples.append(
                {
                    "text_input": np.array([prompt.encode()], dtype=np.object_),
                    "stream": np.array([stream]),
                    "exclude_input_in_output": np.array([True]),
                    "sampling_parameters": np.array([params.encode()], dtype=np.object_),
                    "return_num_input_tokens": np.array([True]),
                    "return_num_output_tokens": np.array([True]),
                    "return_logprobs": np.array([True]),
                }
            )
    return samples


def run_step(ctx: StepContext) -> None:
    if ctx.kind == "vllm.quantize":
        return quant.quantize_run(ctx)
    if ctx.kind == "vllm.lora":
        import shutil

        by_digest = {digest: src for src, digest in ctx.inputs.items()}
        for name, files in ctx.params["adapters"].items():
            for rel, digest in files.items():
                (ctx.out / "lora" / name / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(by_digest[digest], ctx.out / "lora" / name / rel)
        return
    copy_inputs(ctx.inputs, ctx.out / ("draft" if ctx.kind == "vllm.draft" else "model"))


def derive_io(recipe, files, recipe_dir=None):
    return INPUTS, OUTPUTS


def model_json(recipe) -> dict:
    args = (
        {"quantization": quant.METHOD} if recipe.quantize else {}
    )  # explicit: vLLM checks it with config.json
    args.update(
        {k: v for k, v in recipe.engine_args.model_dump(exclude={"extra"}).items() if v is not None}
    )
    args.update(recipe.engine_args.extra)  # check_recipe refuses a key set above or below
    if recipe.lora is not None:  # the backend then reads multi_lora.json beside model.json
        args["enable_lora"] = True
        args.update(
            {k: v for k, v in recipe.lora.model_dump(exclude={"adapters"}).items() if v is not None}
        )
    if (spec := speculative_config(recipe)) is not None:
        args["speculative_config"] = spec
    return {
        "model": f"{recipe.serving.repository_mount}/{recipe.name}/{recipe.version}/model",
        **args,
    }


def multi_lora(recipe) -> dict[str, str]:
    """multi_lora.json: LoRA name → the packaged adapter where the server sees it."""
    base = f"{recipe.serving.repository_mount}/{recipe.name}/{recipe.version}/lora"
    return {name: f"{base}/{name}" for name in sorted(recipe.lora.adapters)} if recipe.lora else {}


def emit(built_model, root: Path, store, manifest_model) -> list:
    from tritonbuild.triton.config import add_tensors, model_config_pb2, render

    r = built_model.plan.recipe
    vdir = root / r.name / str(r.version)
    for rel, entry in built_model.files.items():
        store.materialize(entry.sha256, vdir / rel)
    (vdir / "model.json").write_bytes(pretty_json(model_json(r)))
    if r.lora is not None:
        (vdir / "multi_lora.json").write_bytes(pretty_json(multi_lora(r)))
    serving = _vllm_invariant.serving(r)
    if serving:
        _vllm_invariant.plugin_wheel(vdir / _vllm_invariant.PLUGIN_DIR)
    pb2 = model_config_pb2()
    mc = pb2.ModelConfig()
    mc.name = r.name
    mc.backend = "vllm"
    mc.max_batch_size = 0
    mc.version_policy.latest.num_versions = 1
    mc.model_transaction_policy.decoupled = True
    add_tensors(mc.input, INPUTS, pb2, True)
    add_tensors(mc.output, OUTPUTS, pb2, False)
    g = mc.instance_group.add()
    g.kind, g.count = pb2.ModelInstanceGroup.Kind.Value("KIND_MODEL"), 1
    (root / r.name / "config.pbtxt").write_bytes(render(mc))
    return [
        manifest_model(
            name=r.name,
            version=r.version,
            backend="vllm",
            target="gpu",
            model_identity=sha256_json({k: e.sha256 for k, e in built_model.files.items()}),
            inputs=INPUTS,
            outputs=OUTPUTS,
            max_batch_size=0,
            llm={
                "engine_args": json.loads(pretty_json(model_json(r))),
                "serving_image": r.image.triton_image,
                **({"serving": serving} if serving else {}),
            },
        )
    ]


class VLLMBackend(Backend):
    name = NAME
    recipe_type = VLLMRecipe
    step_toolchain = (
        dict.fromkeys(("vllm.package", "vllm.lora", "vllm.draft"), ("tritonbuild",))
        | quant.TOOLCHAIN
    )
    triton_backend = "vllm"
    model_files = {"": DEFAULT_FILENAME}
    route = "live-server"  # needs vllm and a GPU
    live_protocol = "generate"
    emits = True

    plan_steps = staticmethod(plan_steps)
    run_step = staticmethod(run_step)
    derive_io = staticmethod(derive_io)
    describe = staticmethod(describe)

    def golden_inputs(self, model) -> list[dict]:
        return golden_inputs(model)

    def check_recipe(self, recipe) -> list:
        problems = quant.quantize_problems(recipe)
        if problem := quantization_problem(
            recipe.engine_args.quantization, recipe.image.triton_image
        ):
            problems.append((("engine_args", "quantization"), *problem))
        if problem := rank_problem(recipe.lora, recipe.image.triton_image):
            problems.append((("lora", "max_lora_rank"), *problem))
        if problem := speculative_problem(recipe.speculative, recipe.image.triton_image):
            problems.append((("speculative", "method"), *problem))
        if problem := _vllm_invariant.determinism_problem(recipe):
            problems.append((("serving", "determinism"), *problem))
        extra = recipe.engine_args.extra
        problems += extra_problems(extra, recipe.image.triton_image, set(TYPED_ENGINE_ARGS))
        keys = (
            set(model_json(recipe)) - {"model"} - (set(extra) - TYPED_ENGINE_ARGS)
        )  # checked above
        return problems + engine_args_problems(
            keys, recipe.image.triton_image, set(TYPED_ENGINE_ARGS)
        )

    def emit(self, built_model, root: Path, store, manifest_model, built: dict) -> list:
        return emit(built_model, root, store, manifest_model)

    def adopt_recipe(self, mc, model_dir: Path, out: Path) -> tuple[dict, int]:
        from tritonbuild.backends._vllm_adopt import adopt_vllm

        return adopt_vllm(mc, model_dir, out, set(TYPED_ENGINE_ARGS))

    def offline_checks(
        self, mc, model_dir: Path, versions: list[int]
    ) -> list[tuple[str, list[str], str]]:
        return [
            (
                "vllm",
                load_problems(mc, model_dir, versions),
                "decoupled, max_batch_size 0, KIND_MODEL, model.json",
            )
        ]

    def gpus_needed(self, mc, version_dir: Path) -> int:
        """vLLM places its own devices (KIND_MODEL): model.json's tensor x pipeline parallelism."""
        try:
            doc = json.loads((version_dir / "model.json").read_text())
            return int(doc.get("tensor_parallel_size", 1)) * int(
                doc.get("pipeline_parallel_size", 1)
            )
        except (OSError, ValueError, TypeError, AttributeError):
            return 0


BACKEND = VLLMBackend()
