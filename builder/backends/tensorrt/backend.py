"""TensorRT backend: an ONNX file → a TensorRT plan (model.plan, platform tensorrt_plan) through
trtexec or TensorRT's Python API, with optimization profiles from the recipe, fp16/int8 flags and a
timing cache kept in the build cache (so rebuilds reuse tactics). Where TensorRT is missing the step
is skipped with the reason; --engine MODEL=DIR supplies a prebuilt plan."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Literal

from pydantic import Field

from tritonbuild.backends import StepSkipped
from tritonbuild.backends.base import Backend, PlanContext, StepContext
from tritonbuild.backends.common import local_source, pinned_digest
from tritonbuild.backends.onnxruntime.backend import derive_io as onnx_derive_io
from tritonbuild.core.proc import python_module_argv, run_logged
from tritonbuild.core.stores import is_url
from tritonbuild.core.toolchain import GPU_KEYS
from tritonbuild.errors import BuildError, PlanError
from tritonbuild.recipe.load import LoadedRecipe
from tritonbuild.recipe.models import FileSource, Recipe, Strict

NAME = "tensorrt"
PLATFORM = "tensorrt_plan"
DEFAULT_FILENAME = "model.plan"


class ShapeRange(Strict):
    min: list[int]
    opt: list[int]
    max: list[int]


class TensorRTOptions(Strict):
    profiles: list[dict[str, ShapeRange]] = Field(
        default_factory=list,
        description="Optimization profiles: input name → full shapes (batch first when "
        "max_batch_size > 0) {min, opt, max}.",
    )
    fp16: bool = False
    int8: bool = False
    workspace_mib: int = Field(1024, ge=16)
    builder_optimization_level: int = Field(3, ge=0, le=5)
    timeout_s: int = Field(3600, ge=60)


class TensorRTRecipe(Recipe):
    """A TensorRT plan built from an ONNX model (trtexec or TensorRT's Python API)."""

    backend: Literal["tensorrt"]
    source: FileSource = Field(
        description="The ONNX model the plan is built from (export one with an onnxruntime recipe)."
    )
    tensorrt: TensorRTOptions | None = Field(None, description="How the plan is built.")


def plan_steps(loaded: LoadedRecipe, ctx: PlanContext) -> list[tuple[str, dict, dict[str, str]]]:
    recipe = loaded.recipe
    if recipe.source.path is None or is_url(recipe.source.path):
        raise PlanError(
            "tensorrt plans are built from a local ONNX file",
            where=loaded.where(("source",)),
            hint="point source.path at the .onnx file",
        )
    onnx = local_source(loaded, recipe.source.path, ("source", "path"))
    opts = recipe.tensorrt or TensorRTOptions()
    params = {
        "options": opts.model_dump(exclude={"timeout_s"}),
        "max_batch_size": recipe.max_batch_size,
    }
    return [("tensorrt.engine", params, {str(onnx): pinned_digest(loaded, onnx, ctx)})]


def _shape(dims: list[int]) -> str:
    return "x".join(str(d) for d in dims)


def trtexec_argv(opts: TensorRTOptions, onnx: str, plan: str, timing_cache: str) -> list[str]:
    """The trtexec command line (TensorRT 10): every choice explicit."""
    argv = [
        "trtexec",
        f"--onnx={onnx}",
        f"--saveEngine={plan}",
        f"--memPoolSize=workspace:{opts.workspace_mib}M",
        f"--builderOptimizationLevel={opts.builder_optimization_level}",
        f"--timingCacheFile={timing_cache}",
        "--skipInference",
    ]
    for i, profile in enumerate(opts.profiles):
        if i:
            argv.append("--profile=" + str(i))
        for key, attr in (("--minShapes", "min"), ("--optShapes", "opt"), ("--maxShapes", "max")):
            argv.append(
                f"{key}="
                + ",".join(
                    f"{name}:{_shape(getattr(rng, attr))}" for name, rng in sorted(profile.items())
                )
            )
    if opts.fp16:
        argv.append("--fp16")
    if opts.int8:
        argv.append("--int8")
    return argv


def python_api_spec(opts: TensorRTOptions, onnx: str, plan: str, timing_cache: str) -> dict:
    """What build.py does with TensorRT's Python API (same choices as trtexec_argv)."""
    return {
        "onnx": onnx,
        "plan": plan,
        "timing_cache": timing_cache,
        "workspace_bytes": opts.workspace_mib << 20,
        "builder_optimization_level": opts.builder_optimization_level,
        "fp16": opts.fp16,
        "int8": opts.int8,
        "profiles": [
            {name: rng.model_dump() for name, rng in sorted(p.items())} for p in opts.profiles
        ],
    }


def run_step(ctx: StepContext) -> None:
    opts = TensorRTOptions(
        **ctx.params["options"], timeout_s=ctx.timeout_s or TensorRTOptions().timeout_s
    )
    ((onnx, _digest),) = ctx.inputs.items()
    out, log_dir = ctx.out, ctx.log_dir
    out.mkdir(parents=True, exist_ok=True)
    plan = out / DEFAULT_FILENAME
    cache = ctx.shared_dir / "timing" / "tensorrt.cache"  # shared by every build on this machine
    cache.parent.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    if shutil.which("trtexec"):
        argv = trtexec_argv(opts, onnx, str(plan), str(cache))
    elif importlib.util.find_spec("tensorrt") is not None:
        spec = log_dir / "tensorrt-spec.json"
        spec.write_text(
            json.dumps(python_api_spec(opts, onnx, str(plan), str(cache)), indent=2, sort_keys=True)
        )
        argv = python_module_argv("tritonbuild.backends.tensorrt.build", str(spec))
    else:
        raise StepSkipped(
            "TensorRT is not installed here (no trtexec, no tensorrt module); build on a GPU "
            "runner with TensorRT, or pass --engine MODEL=DIR holding model.plan"
        )
    res = run_logged(argv, cwd=log_dir, log_path=log_dir / "tensorrt.log", timeout=opts.timeout_s)
    if res.returncode != 0 or not plan.is_file():
        why = "timed out" if res.timed_out else f"exit {res.returncode}"
        raise BuildError(
            f"TensorRT build failed ({why}):\n{res.tail()}",
            where=str(res.log_path),
            hint=f"reproduce with {log_dir / 'reproduce.sh'}",
        )


def derive_io(recipe: Recipe, files: dict[str, Path], recipe_dir: Path | None = None):
    """I/O come from the source ONNX graph (the plan is opaque without TensorRT)."""
    onnx = Path(recipe.source.path)
    return onnx_derive_io(
        recipe, {"model.onnx": onnx if onnx.is_absolute() else Path(recipe_dir) / onnx}
    )


def configure(mc, recipe: Recipe) -> None:
    mc.platform = PLATFORM
    mc.backend = "tensorrt"
    profiles = recipe.tensorrt.profiles if recipe.tensorrt else []
    if len(profiles) > 1:
        for g in mc.instance_group:
            g.profile.extend(str(i) for i in range(len(profiles)))


def check_recipe(recipe: Recipe) -> list[tuple]:
    """A plan is built from an ONNX file, with optimization profiles Triton can fill."""
    out = []
    for i, profile in enumerate(recipe.tensorrt.profiles if recipe.tensorrt else []):
        for name, shapes in profile.items():
            loc = ("tensorrt", "profiles", i, name)
            if not len(shapes.min) == len(shapes.opt) == len(shapes.max):
                out.append(
                    (
                        loc,
                        "min, opt and max must have the same rank",
                        "give every shape the same rank",
                    )
                )
            elif any(
                not (low <= opt <= high)
                for low, opt, high in zip(shapes.min, shapes.opt, shapes.max, strict=True)
            ):
                out.append(
                    (
                        loc,
                        f"profile shapes must satisfy min <= opt <= max in every dim, got min "
                        f"{shapes.min}, opt {shapes.opt}, max {shapes.max}",
                        "fix the shape ranges",
                    )
                )
            elif recipe.max_batch_size and shapes.max and shapes.max[0] < recipe.max_batch_size:
                out.append(
                    (
                        loc,
                        f"profile max batch {shapes.max[0]} < max_batch_size "
                        f"{recipe.max_batch_size}: Triton would send batches the engine cannot "
                        "take",
                        "raise max[0] or lower max_batch_size",
                    )
                )
    return out


class TensorRTBackend(Backend):
    name = NAME
    recipe_type = TensorRTRecipe
    step_toolchain = {"tensorrt.engine": ("tritonbuild", "tensorrt", "trtexec", *GPU_KEYS)}
    tools = {"tensorrt": "tensorrt"}
    engine_steps = ("tensorrt.engine",)
    triton_backend = "tensorrt"
    model_files = {"": DEFAULT_FILENAME, PLATFORM: DEFAULT_FILENAME}
    route = "live-server"  # needs TensorRT and a GPU: a tritonserver given with --server
    prebuilt_prefix = ""  # --engine DIR holds model.plan itself
    unreproducible_files = ("*.plan",)  # a TensorRT engine: tactic timing differs between builds

    plan_steps = staticmethod(plan_steps)
    run_step = staticmethod(run_step)
    derive_io = staticmethod(derive_io)
    configure = staticmethod(configure)
    check_recipe = staticmethod(check_recipe)

    def step_timeout(self, recipe, kind: str) -> int | None:
        return (recipe.tensorrt or TensorRTOptions()).timeout_s


BACKEND = TensorRTBackend()
