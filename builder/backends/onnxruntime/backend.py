"""onnxruntime backend: an .onnx file (local, URL, or exported from a seeded torch module); I/O from
the graph."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Literal

from pydantic import Field

from tritonbuild.backends.base import Backend, PlanContext, StepContext
from tritonbuild.backends.common import fetch_url, local_source, pinned_digest
from tritonbuild.backends.onnxruntime.accelerators import (
    Accelerators,
    accelerator_problems,
    add_accelerators,
    adopt_accelerators,
)
from tritonbuild.core.proc import python_module_argv, run_logged
from tritonbuild.core.stores import is_url
from tritonbuild.errors import BuildError, PlanError
from tritonbuild.recipe.load import LoadedRecipe
from tritonbuild.recipe.models import Recipe, Source, TensorSpec, TorchExport

NAME = "onnxruntime"
PLATFORM = "onnxruntime_onnx"
DEFAULT_FILENAME = "model.onnx"
EXPORT_TIMEOUT_S = 1800

# onnx.TensorProto element type → recipe dtype
ONNX_DTYPES = {
    1: "fp32",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    8: "bytes",
    9: "bool",
    10: "fp16",
    11: "fp64",
    12: "uint32",
    13: "uint64",
    16: "bf16",
}


class OnnxExport(TorchExport):
    dynamic_axes: dict[str, dict[int, str]] | None = Field(
        None,
        description="Axis names per tensor; default: axis 0 of every tensor when max_batch_size > "
        "0.",
    )
    opset: int = Field(17, ge=7, le=23, description="ONNX opset.")


class OnnxSource(Source):
    path: str | None = Field(
        None,
        description="*.onnx: a local path (relative to the recipe) or an fsspec URL "
        "(pinned by sha256).",
    )
    export: OnnxExport | None = Field(
        None, description="Export an ONNX model from a seeded torch module."
    )


class OnnxRuntimeRecipe(Recipe):
    """An ONNX model (a file, or exported from a seeded torch module) served by the onnxruntime backend."""

    backend: Literal["onnxruntime"]
    source: OnnxSource
    accelerators: Accelerators | None = Field(
        None, description="Execution accelerators (optimization.execution_accelerators)."
    )


def _module_file(loaded: LoadedRecipe, module: str) -> Path:
    rel = Path(*module.split("."))
    for cand in (loaded.base_dir / rel.with_suffix(".py"), loaded.base_dir / rel / "__init__.py"):
        if cand.is_file():
            return cand
    raise PlanError(
        f"export module {module!r} not found next to the recipe ({rel}.py)",
        where=loaded.where(("source", "export", "module")),
        hint="put the module beside the recipe, or fix the 'module:function' name",
    )


def plan_steps(loaded: LoadedRecipe, ctx: PlanContext) -> list[tuple[str, dict, dict[str, str]]]:
    recipe, src = loaded.recipe, loaded.recipe.source
    if src.export is not None:
        ex = src.export
        mod_name = ex.module.split(":")[0]
        path = _module_file(loaded, mod_name)
        dyn = ex.dynamic_axes
        if dyn is None and recipe.max_batch_size > 0:
            dyn = {n: {0: "batch"} for n in [*ex.inputs, *ex.outputs]}
        params = {
            "module": ex.module,
            "seed": ex.seed,
            "opset": ex.opset,
            "outputs": list(ex.outputs),
            "inputs": {k: v.model_dump() for k, v in ex.inputs.items()},
            "dynamic_axes": {k: {str(a): n for a, n in v.items()} for k, v in (dyn or {}).items()},
        }
        return [("onnx.export", params, {str(path): ctx.digest(path)})]
    if is_url(src.path):
        if not src.sha256:
            raise PlanError(
                f"{src.path} is remote and not pinned",
                where=loaded.where(("source", "path")),
                hint="add source.sha256 so that builds are reproducible and cacheable",
            )
        return [("onnx.fetch", {"url": src.path}, {src.path: src.sha256})]
    path = local_source(loaded, src.path, ("source", "path"))
    return [("onnx.fetch", {}, {str(path): pinned_digest(loaded, path, ctx)})]


def module_root(module: str, path: str) -> Path:
    """The directory a 'pkg.mod:function' module is imported from, given the module's file (an
    input)."""
    depth = len(module.split(":")[0].split("."))
    file = Path(path).resolve()
    return file.parents[depth] if file.name == "__init__.py" else file.parents[depth - 1]


def run_export(ctx: StepContext, target: Path, log_name: str) -> object:
    """Run pytorch/export.py in a subprocess on the step's module (its only input), writing target."""
    require_torch()
    ((module_file, _digest),) = ctx.inputs.items()
    # NOTE: absolute: the subprocess runs in this directory and puts it on sys.path itself (not via
    # its cwd).
    root = module_root(ctx.params["module"], module_file).resolve()
    ctx.log_dir.mkdir(parents=True, exist_ok=True)
    spec_path = ctx.log_dir / "export-spec.json"
    spec_path.write_text(
        json.dumps({**ctx.params, "recipe_dir": str(root)}, sort_keys=True, indent=2)
    )
    return run_logged(
        python_module_argv("tritonbuild.backends.pytorch.export", str(spec_path), str(target)),
        cwd=root,
        log_path=ctx.log_dir / log_name,
        timeout=ctx.timeout_s or EXPORT_TIMEOUT_S,
    )


def run_step(ctx: StepContext) -> None:
    params = ctx.params
    target = ctx.out / DEFAULT_FILENAME
    ctx.out.mkdir(parents=True, exist_ok=True)
    if ctx.kind == "onnx.fetch":
        ((src, digest),) = ctx.inputs.items()
        if "url" in params:
            fetch_url(params["url"], target, digest)
        else:
            shutil.copyfile(src, target)
        _check_onnx(target, params.get("url") or src)
        return
    res = run_export(ctx, target, "onnx.export.log")
    if res.returncode != 0:
        why = "timed out" if res.timed_out else f"exit {res.returncode}"
        raise BuildError(
            f"torch → ONNX export of {params['module']} failed ({why}):\n{res.tail()}",
            where=str(res.log_path),
            hint=f"reproduce with {res.log_path.with_name('reproduce.sh')}",
        )
    _check_onnx(target, params["module"])


def _onnx():
    try:
        import onnx
    except ImportError:
        raise BuildError(
            "the onnx package is not installed", hint="pip install 'tritonbuild[onnx]'"
        ) from None
    return onnx


def require_torch() -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise BuildError(
            "exporting from a torch module needs torch, which is not installed",
            hint="pip install 'tritonbuild[torch]' (and [onnx] for ONNX exports)",
        )


def _check_onnx(path: Path, origin: str) -> None:
    onnx = _onnx()

    try:
        model = onnx.load(str(path), load_external_data=False)
        onnx.checker.check_model(model)
    except Exception as e:  # noqa: BLE001 - onnx raises DecodeError, ValidationError, ...
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BuildError(
            f"{origin} is not a valid ONNX model ({type(e).__name__}: {first})",
            hint="point source.path at an .onnx file written by an ONNX exporter",
        ) from None


def _graph_specs(values, initializers: set[str]) -> list[TensorSpec]:
    out = []
    for v in values:
        if v.name in initializers:
            continue
        tt = v.type.tensor_type
        dims = [
            d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in tt.shape.dim
        ]
        out.append(TensorSpec(name=v.name, dtype=ONNX_DTYPES.get(tt.elem_type, "fp32"), dims=dims))
    return out


def derive_io(
    recipe: Recipe, files: dict[str, Path], recipe_dir=None
) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """Config I/O from the graph; batch dim stripped when max_batch_size > 0; recipe I/O must
    agree."""
    onnx = _onnx()

    model = onnx.load(str(files[DEFAULT_FILENAME]), load_external_data=False)
    graph = onnx.shape_inference.infer_shapes(model).graph
    inits = {i.name for i in graph.initializer}
    result = []
    for key, specs in (
        ("inputs", _graph_specs(graph.input, inits)),
        ("outputs", _graph_specs(graph.output, inits)),
    ):
        if recipe.max_batch_size > 0:
            for s in specs:
                if not s.dims or s.dims[0] != -1:
                    raise BuildError(
                        f"graph {key[:-1]} {s.name!r} has shape {s.dims}: its first dimension must "
                        f"be variable when max_batch_size is {recipe.max_batch_size}",
                        hint="export with a dynamic batch axis (dynamic_axes) or set "
                        "max_batch_size: 0",
                    )
            specs = [s.model_copy(update={"dims": s.dims[1:]}) for s in specs]
        given = getattr(recipe, key)
        result.append(_reconcile(key, specs, given) if given else specs)
    return result[0], result[1]


def _reconcile(key: str, graph: list[TensorSpec], given: list[TensorSpec]) -> list[TensorSpec]:
    by_name = {s.name: s for s in graph}
    if sorted(by_name) != sorted(s.name for s in given):
        raise BuildError(
            f"recipe {key} {sorted(s.name for s in given)} do not match the ONNX graph's "
            f"{sorted(by_name)}",
            hint=f"use the graph's names in '{key}' or drop '{key}' to derive them",
        )
    out = []
    for s in given:
        g = by_name[s.name]
        if s.dtype != g.dtype:
            raise BuildError(
                f"{key} {s.name!r}: recipe says {s.dtype}, the ONNX graph says {g.dtype}",
                hint=f"set dtype: {g.dtype}",
            )
        if len(s.dims) != len(g.dims) or any(
            gd != -1 and sd != gd for sd, gd in zip(s.dims, g.dims, strict=True)
        ):
            raise BuildError(
                f"{key} {s.name!r}: recipe dims {s.dims} contradict the ONNX graph's {g.dims} "
                "(batch dimension excluded)",
                hint=f"use dims compatible with {g.dims}",
            )
        out.append(s)
    return out


def configure(mc, recipe: Recipe) -> None:
    mc.platform = PLATFORM
    mc.backend = "onnxruntime"
    if recipe.accelerators is not None:
        add_accelerators(mc, recipe.accelerators)


def check_recipe(recipe) -> list[tuple]:
    """The accelerators' rules, and portable numerics refused: onnxruntime's MLAS picks its kernels
    from CPUID (AVX2/FMA3, AVX-512, VNNI, AMX) with no environment variable or session option that
    caps or pins the choice (microsoft/onnxruntime 89b01b4, onnxruntime/core/mlas/lib/platform.cpp
    L483-575; session_options_config_keys.h has x86 keys for none), and its deterministic-compute
    option is read by CUDA kernels only."""
    numerics = getattr(recipe, "numerics", None)
    refused = (
        [
            (
                ("numerics", "mode"),
                "onnxruntime cannot run portable: its CPU kernels (MLAS) are chosen from the "
                "CPU's features at start, and nothing caps that choice, so an AVX-512 machine "
                "may round differently from an AVX2 one",
                "remove numerics (native: verify keeps goldens per machine class and tells a "
                "machine difference from a model change), or export the model with the pytorch "
                "backend, which can run portable",
            )
        ]
        if numerics is not None and numerics.mode == "portable"
        else []
    )
    return accelerator_problems(recipe) + refused


class OnnxRunner:
    """onnxruntime in-process on the repository's own model.onnx (CPU provider, fixed thread
    count)."""

    def __init__(self, path: Path, model):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self.model = model

    def infer(self, sample: dict) -> dict:
        names = [t.name for t in self.model.outputs]
        return dict(zip(names, self.session.run(names, sample), strict=True))

    def infer_concurrent(self, samples: list[dict]) -> list[dict]:
        return [self.infer(s) for s in samples]

    def close(self) -> None:
        pass


class OnnxRuntimeBackend(Backend):
    name = NAME
    recipe_type = OnnxRuntimeRecipe
    step_toolchain = {
        "onnx.fetch": ("tritonbuild", "onnx"),
        "onnx.export": ("tritonbuild", "python", "torch", "onnx"),
    }
    tools = {"onnx": "onnx", "onnxruntime": "onnxruntime", "torch": "torch"}
    triton_backend = "onnxruntime"
    model_files = {"": DEFAULT_FILENAME, PLATFORM: DEFAULT_FILENAME}
    route = "in-process"  # the embedded tritonserver has only the python backend (docs/FACTS)

    plan_steps = staticmethod(plan_steps)
    run_step = staticmethod(run_step)
    derive_io = staticmethod(derive_io)
    configure = staticmethod(configure)
    check_recipe = staticmethod(check_recipe)
    adopt_consumes = frozenset({"optimization"})

    def adopt_fields(self, mc) -> dict:
        return adopt_accelerators(mc)

    def model_content_checks(
        self, mc, model_dir: Path, versions: list[int]
    ) -> list[tuple[str, list[str], str]]:
        """config.pbtxt against the ONNX graph, as the onnxruntime backend checks it at load
        (rules.py)."""
        from tritonbuild.backends.onnxruntime.rules import onnx_problems

        found = self.present_model_files(mc, model_dir, versions)
        if not found:
            return []
        return [
            (
                "onnx",
                [f"{f.parent.name}/{f.name}: {e}" for f in found for e in onnx_problems(mc, f)],
                "config matches the ONNX graph (the onnxruntime backend's load checks, ported)",
            )
        ]

    def route_detail(self, toolchain: dict[str, str]) -> str:
        return f"onnxruntime {toolchain.get('onnxruntime', '?')} in-process"

    def in_process_runner(self, version_dir: Path, model):
        return OnnxRunner(version_dir / DEFAULT_FILENAME, model)

    def runner_extra(self) -> str:
        return "onnx"


BACKEND = OnnxRuntimeBackend()
