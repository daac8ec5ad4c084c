"""vLLM backend: the checkpoint packaged in the version directory, model.json with typed engine args,
config.pbtxt as the vLLM backend expects it (decoupled, max_batch_size 0, KIND_MODEL)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from tritonbuild.backends.base import Backend, PlanContext, StepContext
from tritonbuild.backends.common import copy_inputs
from tritonbuild.core.hashing import pretty_json, sha256_json
from tritonbuild.errors import PlanError, RecipeError
from tritonbuild.recipe.load import LoadedRecipe
from tritonbuild.recipe.models import SCHEMA_VERSION, Checkpoint, Named, Strict, TensorSpec, Verify

NAME = "vllm"
DEFAULT_FILENAME = "model.json"
# Every tensor the vLLM backend declares (vllm_backend src/model.py, recorded in tests/contracts): written out, so
# the manifest and verify know the whole interface and a server with --disable-auto-complete-config takes the
# OpenAI frontend's requests (return_num_*_tokens, return_logprobs, ...).
INPUTS = [TensorSpec(name="text_input", dtype="bytes", dims=[1]),
          TensorSpec(name="image", dtype="bytes", dims=[-1], optional=True),
          TensorSpec(name="stream", dtype="bool", dims=[1], optional=True),
          TensorSpec(name="sampling_parameters", dtype="bytes", dims=[1], optional=True),
          *[TensorSpec(name=n, dtype="bool", dims=[1], optional=True)
            for n in ("exclude_input_in_output", "return_finish_reason", "return_cumulative_logprob",
                      "return_logprobs", "return_num_input_tokens", "return_num_output_tokens")],
          TensorSpec(name="embedding_request", dtype="bytes", dims=[1], optional=True)]
OUTPUTS = [TensorSpec(name="text_output", dtype="bytes", dims=[-1]),
           TensorSpec(name="finish_reason", dtype="bytes", dims=[-1]),
           TensorSpec(name="cumulative_logprob", dtype="fp32", dims=[-1]),
           TensorSpec(name="logprobs", dtype="bytes", dims=[-1]),
           TensorSpec(name="num_input_tokens", dtype="uint32", dims=[1]),
           TensorSpec(name="num_output_tokens", dtype="uint32", dims=[-1])]



class VLLMRecipe(Named):
    """A vLLM-backend model: config.pbtxt (KIND_MODEL, decoupled, max_batch_size 0) + 1/model.json."""

    schema_version: Literal[1] = SCHEMA_VERSION
    backend: Literal["vllm"]
    checkpoint: Checkpoint
    engine_args: VLLMEngineArgs = Field(default_factory=lambda: VLLMEngineArgs())
    serving: VLLMServing = Field(default_factory=lambda: VLLMServing())
    image: VLLMImage = Field(default_factory=lambda: VLLMImage())
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
    enable_prefix_caching: bool | None = Field(None, description="None: vLLM's default (on).")
    quantization: Literal["awq", "gptq", "fp8"] | None = None
    seed: int = 0


class VLLMImage(Strict):
    triton_image: str = Field("nvcr.io/nvidia/tritonserver:25.12-vllm-python-py3",
                              description="Serving image with Triton's vLLM backend (the *-vllm-python-py3 tags; "
                                          "the trtllm images do not ship it).")

    @field_validator("triton_image")
    @classmethod
    def _vllm_backend(cls, v: str) -> str:
        if v.startswith("nvcr.io/nvidia/tritonserver:") and not v.endswith("-vllm-python-py3"):
            raise ValueError(f"{v} has no vLLM backend: use a tritonserver:<tag>-vllm-python-py3 image")
        return v


class VLLMServing(Strict):
    repository_mount: str = Field("/models", description="Where the server sees this repository; model.json "
                                                         "points at the packaged weights under it.")


VLLMRecipe.model_rebuild()


def plan_steps(loaded: LoadedRecipe, ctx: PlanContext) -> list[tuple[str, dict, dict[str, str]]]:
    from tritonbuild.backends.tensorrtllm import read_checkpoint
    from tritonbuild.backends.tensorrtllm.memory import Architecture, tp_heads_problem

    ckpt, config, files = read_checkpoint(loaded, ctx)
    tp = loaded.recipe.engine_args.tensor_parallel_size
    if (heads := tp_heads_problem(Architecture.from_hf_config(config), tp)) is not None:
        raise RecipeError(f"engine_args.tensor_parallel_size: {heads}",
                          where=loaded.where(("engine_args", "tensor_parallel_size")),
                          hint="pick a tensor_parallel_size that divides the heads, or use pipeline_parallel_size")
    if not (ckpt / "tokenizer.json").is_file() and not (ckpt / "tokenizer_config.json").is_file():
        raise PlanError(f"{ckpt} has no tokenizer files", where=loaded.where(("checkpoint", "path")),
                        hint="save the tokenizer into the checkpoint directory (vLLM loads it from there)")
    return [("vllm.package", {"layout": sorted(files)}, {str(ckpt / k): v for k, v in files.items()})]


def run_step(ctx: StepContext) -> None:
    copy_inputs(ctx.inputs, ctx.out / "model")


def derive_io(recipe, files, recipe_dir=None):
    return INPUTS, OUTPUTS


def model_json(recipe) -> dict:
    args = {k: v for k, v in recipe.engine_args.model_dump().items() if v is not None}
    return {"model": f"{recipe.serving.repository_mount}/{recipe.name}/{recipe.version}/model", **args}


def emit(built_model, root: Path, store, manifest_model) -> list:
    from tritonbuild.triton.config import add_tensors, model_config_pb2, render

    r = built_model.plan.recipe
    vdir = root / r.name / str(r.version)
    for rel, entry in built_model.files.items():
        store.materialize(entry.sha256, vdir / rel)
    (vdir / "model.json").write_bytes(pretty_json(model_json(r)))
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
    return [manifest_model(name=r.name, version=r.version, backend="vllm", target="gpu",
                           model_identity=sha256_json({k: e.sha256 for k, e in built_model.files.items()}),
                           inputs=INPUTS, outputs=OUTPUTS, max_batch_size=0,
                           llm={"engine_args": json.loads(pretty_json(model_json(r))),
                                "serving_image": r.image.triton_image})]


def load_problems(mc, model_dir: Path, versions: list[int]) -> list[str]:
    """What the vLLM backend needs to load a model (offline, from config.pbtxt and model.json)."""
    p = []
    if mc.max_batch_size != 0:
        p.append("the vLLM backend needs max_batch_size 0 (it batches internally)")
    # NOTE: the backend's auto_complete_config sets decoupled: true where the config leaves
    # model_transaction_policy out, and refuses to change a decoupled: false written there
    # (vllm_backend src/model.py, python_backend set_model_transaction_policy; tests/contracts/facts).
    if mc.HasField("model_transaction_policy") and not mc.model_transaction_policy.decoupled:
        p.append("the vLLM backend needs model_transaction_policy.decoupled: true (its auto_complete_config "
                 "sets it only where the config leaves model_transaction_policy out)")
    world = 1
    for v in versions:
        try:
            doc = json.loads((model_dir / str(v) / "model.json").read_text())
            if "model" not in doc:
                p.append(f"{v}/model.json has no 'model'")
            world = max(world, int(doc.get("tensor_parallel_size", 1)) * int(doc.get("pipeline_parallel_size", 1)))
        except (OSError, ValueError, TypeError, AttributeError) as e:
            p.append(f"{v}/model.json is not valid JSON: {e}")
    kinds = {type(g).Kind.Name(g.kind) for g in mc.instance_group}
    if "KIND_GPU" in kinds and world > 1:
        p.append(f"use instance_group kind KIND_MODEL: the vLLM backend refuses KIND_GPU with tensor x pipeline "
                 f"parallelism {world} > 1")
    elif kinds - {"KIND_MODEL", "KIND_GPU"}:
        p.append(f"instance_group kind {sorted(kinds - {'KIND_MODEL', 'KIND_GPU'})}: use KIND_MODEL (vLLM places "
                 "its own devices) or KIND_GPU for one GPU")
    return p

class VLLMBackend(Backend):
    name = NAME
    recipe_type = VLLMRecipe
    step_toolchain = {"vllm.package": ("tritonbuild",)}
    triton_backend = "vllm"
    model_files = {"": DEFAULT_FILENAME}
    route = "live-server"  # needs vllm and a GPU
    emits = True

    plan_steps = staticmethod(plan_steps)
    run_step = staticmethod(run_step)
    derive_io = staticmethod(derive_io)

    def emit(self, built_model, root: Path, store, manifest_model, built: dict) -> list:
        return emit(built_model, root, store, manifest_model)

    def offline_checks(self, mc, model_dir: Path, versions: list[int]) -> list[tuple[str, list[str], str]]:
        return [("vllm", load_problems(mc, model_dir, versions), "decoupled, max_batch_size 0, KIND_MODEL, "
                 "model.json")]


BACKEND = VLLMBackend()
