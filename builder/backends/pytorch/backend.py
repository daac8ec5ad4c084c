"""PyTorch backend: a seeded torch module exported as TorchScript (model.pt, platform
pytorch_libtorch) or as a torch.export/AOTInductor package (model.pt2, platform torch_aoti), or a
saved TorchScript file.

Tensor names follow the libtorch convention `<name>__<index>` (inputs in forward() order, outputs in
order); dtypes and shapes come from running the exported module on the example inputs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Literal

from pydantic import Field

from tritonbuild.backends.base import Backend, PlanContext, StepContext
from tritonbuild.backends.common import local_source, pinned_digest
from tritonbuild.backends.onnxruntime.backend import _module_file, run_export
from tritonbuild.backends.pytorch.rules import TORCH_DTYPES
from tritonbuild.core.stores import is_url
from tritonbuild.errors import BuildError, PlanError
from tritonbuild.recipe.buckets import Buckets, buckets_field
from tritonbuild.recipe.load import LoadedRecipe
from tritonbuild.recipe.models import DTYPES, Recipe, Source, TensorSpec, TorchExport

NAME = "pytorch"
FILES = {"torchscript": ("model.pt", "pytorch_libtorch"), "aoti": ("model.pt2", "torch_aoti")}
TORCH_TO_DTYPE = {
    "torch.float32": "fp32",
    "torch.float16": "fp16",
    "torch.float64": "fp64",
    "torch.bfloat16": "bf16",
    "torch.int64": "int64",
    "torch.int32": "int32",
    "torch.int16": "int16",
    "torch.int8": "int8",
    "torch.uint8": "uint8",
    "torch.bool": "bool",
}
DEFAULT_FILENAME = "model.pt"


class PyTorchExport(TorchExport):
    format: Literal["torchscript", "aoti"] = Field(
        "torchscript",
        description="TorchScript (model.pt) or torch.export + AOTInductor package (model.pt2).",
    )
    method: Literal["trace", "script"] = Field(
        "trace", description="TorchScript: torch.jit.trace or script."
    )


class PyTorchSource(Source):
    path: str | None = Field(None, description="A saved TorchScript file (relative to the recipe).")
    export: PyTorchExport | None = Field(
        None, description="Export a seeded torch module (TorchScript or AOTInductor)."
    )


class PyTorchRecipe(Recipe):
    """A TorchScript or AOTInductor export of a seeded torch module, served by the pytorch backend."""

    backend: Literal["pytorch"]
    source: PyTorchSource
    batch_buckets: Buckets = buckets_field()


def filename(recipe: Recipe) -> str:
    ex = recipe.source.export
    return FILES[ex.format][0] if ex is not None else "model.pt"


def plan_steps(loaded: LoadedRecipe, ctx: PlanContext) -> list[tuple[str, dict, dict[str, str]]]:
    recipe, src = loaded.recipe, loaded.recipe.source
    if src.export is None:
        if is_url(src.path):
            raise PlanError(
                "pytorch sources must be local files",
                where=loaded.where(("source", "path")),
                hint="download the TorchScript file first",
            )
        path = local_source(loaded, src.path, ("source", "path"))
        return [("torch.fetch", {}, {str(path): pinned_digest(loaded, path, ctx)})]
    ex = src.export
    path = _module_file(loaded, ex.module.split(":")[0])
    params = {
        "module": ex.module,
        "seed": ex.seed,
        "format": ex.format,
        "method": ex.method,
        "outputs": list(ex.outputs),
        "inputs": {k: v.model_dump() for k, v in ex.inputs.items()},
        "max_batch_size": recipe.max_batch_size,
        "target": "pytorch",
        "dynamic_axes": {},
        "opset": 17,
        "archive": 2,
    }  # 2: location-independent TorchScript (normalize_torchscript)
    # NOTE: dynamic_axes and opset are the ONNX export's (onnxruntime's recipe options, not
    # pytorch's): this export reads neither; they stay in the params with the values they always had
    # so that cache keys (and the manifests that record them) do not change.
    if recipe.batch_buckets:
        # only then: the cache keys of models without buckets stay as they were
        params["buckets"] = list(recipe.batch_buckets)
    return [("torch.export", params, {str(path): ctx.digest(path)})]


def run_step(ctx: StepContext) -> None:
    params = ctx.params
    ctx.out.mkdir(parents=True, exist_ok=True)
    if ctx.kind == "torch.fetch":
        ((src, _digest),) = ctx.inputs.items()
        shutil.copyfile(src, ctx.out / "model.pt")
        return
    target = ctx.out / FILES[params["format"]][0]
    res = run_export(ctx, target, "torch.export.log")
    if res.returncode != 0:
        why = "timed out" if res.timed_out else f"exit {res.returncode}"
        raise BuildError(
            f"torch export ({params['format']}) of {params['module']} failed ({why}); the exporter "
            f"said:\n{res.tail()}",
            where=str(res.log_path),
            hint="make the module traceable/scriptable (no data-dependent Python control flow for "
            f"trace), or try method: script; reproduce with {ctx.log_dir / 'reproduce.sh'}",
        )


def load(path: Path, fmt: str):
    """The exported module, callable on tensors: TorchScript ('torchscript') or an AOTInductor
    package."""
    import torch

    if fmt == "aoti":
        return torch._inductor.aoti_load_package(str(path))
    return torch.jit.load(str(path), map_location="cpu")


def derive_io(
    recipe: Recipe, files: dict[str, Path], recipe_dir=None
) -> tuple[list[TensorSpec], list[TensorSpec]]:
    if recipe.source.export is None:
        return list(recipe.inputs), list(recipe.outputs)
    import torch

    from tritonbuild.backends.pytorch.export import example_inputs

    ex = recipe.source.export
    spec = {"seed": ex.seed, "inputs": {k: v.model_dump() for k, v in ex.inputs.items()}}
    args = example_inputs(torch, spec)
    try:
        with torch.no_grad():
            result = load(files[filename(recipe)], ex.format)(*args)
    except Exception as e:  # noqa: BLE001 - torch raises many types; the export is unusable either way
        raise BuildError(
            f"the exported {ex.format} model does not run on its example inputs: "
            f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
            hint="check the module and example inputs",
        ) from None
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(results) != len(ex.outputs):
        raise BuildError(
            f"the module returns {len(results)} tensors, the recipe names {len(ex.outputs)} "
            f"outputs {ex.outputs}",
            hint="list one name per returned tensor in source.export.outputs",
        )
    batch = recipe.max_batch_size > 0

    def spec_of(name: str, t, i: int) -> TensorSpec:
        dims = list(t.shape[1:]) if batch else list(t.shape)
        return TensorSpec(name=f"{name}__{i}", dtype=TORCH_TO_DTYPE[str(t.dtype)], dims=dims)

    inputs = [spec_of(n, a, i) for i, (n, a) in enumerate(zip(ex.inputs, args, strict=False))]
    outputs = [spec_of(n, t, i) for i, (n, t) in enumerate(zip(ex.outputs, results, strict=False))]
    for given, derived in ((recipe.inputs, inputs), (recipe.outputs, outputs)):
        if given and [(g.name, g.dtype) for g in given] != [(d.name, d.dtype) for d in derived]:
            raise BuildError(
                f"recipe declares {[(g.name, g.dtype) for g in given]}, the module gives "
                f"{[(d.name, d.dtype) for d in derived]}",
                hint="drop the declaration or match it",
            )
    return (list(recipe.inputs) if recipe.inputs else inputs), (
        list(recipe.outputs) if recipe.outputs else outputs
    )


def configure(mc, recipe: Recipe) -> None:
    ex = recipe.source.export
    mc.platform = FILES[ex.format][1] if ex is not None else "pytorch_libtorch"
    mc.backend = "pytorch"


class TorchRunner:
    """torch in-process on the repository's own model.pt / model.pt2; tensors matched by their
    __index."""

    def __init__(self, path: Path, model):
        import numpy as np
        import torch

        torch.set_num_threads(1)
        self.torch, self.np = torch, np
        self.module = load(path, "aoti" if path.suffix == ".pt2" else "torchscript")
        self.model = model

    def infer(self, sample: dict) -> dict:
        args = [
            self.torch.from_numpy(self.np.ascontiguousarray(sample[t.name]))
            for t in self.model.inputs
        ]
        with self.torch.no_grad():
            result = self.module(*args)
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        return {t.name: out.numpy() for t, out in zip(self.model.outputs, results, strict=False)}

    def infer_concurrent(self, samples: list[dict]) -> list[dict]:
        return [self.infer(s) for s in samples]

    def close(self) -> None:
        pass


def check_recipe(recipe: Recipe) -> list[tuple]:
    if recipe.source.export is None and not (recipe.inputs and recipe.outputs):
        return [
            (
                ("source",),
                "a saved TorchScript file needs 'inputs' and 'outputs' declared",
                "declare them, or use source.export so they are derived from the example inputs",
            )
        ]
    if recipe.batch_buckets and (
        recipe.source.export is None or recipe.source.export.format != "torchscript"
    ):
        return [
            (
                ("batch_buckets",),
                "batch_buckets are generated into a TorchScript export (source.export, "
                "format torchscript); not into a saved file or an AOTInductor package",
                "export with format: torchscript, or remove batch_buckets",
            )
        ]
    if filename(recipe) != "model.pt":
        return []
    # The libtorch backend maps only these TYPE_s to torch dtypes (pytorch_backend r24.10
    # libtorch_utils.cc ModelConfigDataTypeToTorchType); any other refuses to load, though torch
    # in-process would run it.
    out = []
    for key, tensors in (("inputs", recipe.inputs), ("outputs", recipe.outputs)):
        for i, t in enumerate(tensors or []):  # None: derived from the export
            if DTYPES[t.dtype].removeprefix("TYPE_") not in (*TORCH_DTYPES, "STRING"):
                out.append(
                    (
                        (key, i, "dtype"),
                        f"dtype {t.dtype}: Triton's PyTorch backend (TorchScript) has no "
                        f"torch type for {DTYPES[t.dtype]} and refuses to load the model",
                        "use one of "
                        + ", ".join(
                            k for k, v in DTYPES.items() if v.removeprefix("TYPE_") in TORCH_DTYPES
                        ),
                    )
                )
    return out


class PyTorchBackend(Backend):
    name = NAME
    recipe_type = PyTorchRecipe
    step_toolchain = {
        "torch.fetch": ("tritonbuild",),
        "torch.export": ("tritonbuild", "python", "torch"),
    }
    tools = {"torch": "torch"}
    triton_backend = "pytorch"
    model_files = {"": "model.pt", "pytorch_libtorch": "model.pt", "torch_aoti": "model.pt2"}
    route = "in-process"  # the embedded tritonserver has only the python backend

    plan_steps = staticmethod(plan_steps)
    run_step = staticmethod(run_step)
    derive_io = staticmethod(derive_io)
    configure = staticmethod(configure)
    check_recipe = staticmethod(check_recipe)

    def default_filename(self, recipe) -> str:
        return filename(recipe)

    def route_detail(self, toolchain: dict[str, str]) -> str:
        return f"torch {toolchain.get('torch', '?')} in-process"

    def model_content_checks(
        self, mc, model_dir: Path, versions: list[int]
    ) -> list[tuple[str, list[str], str]]:
        """config.pbtxt against the TorchScript forward() schema, as the libtorch backend checks it
        at load (rules.py). torch_aoti packages are not checked: 2.51's backend does not know
        that platform."""
        if mc.platform == "torch_aoti":
            return []
        found = self.present_model_files(mc, model_dir, versions)
        if not found:
            return []
        from tritonbuild.backends.pytorch.rules import libtorch_problems

        problems = []
        for f in found:
            try:
                problems += [f"{f.parent.name}/{f.name}: {e}" for e in libtorch_problems(mc, f)]
            except ImportError:
                return []  # no torch here: the in-process route says how to install it
            except Exception as e:  # noqa: BLE001 - torch.jit.load raises RuntimeError and friends on a bad file
                problems.append(
                    f"{f.parent.name}/{f.name}: torch.jit.load cannot read it ({type(e).__name__}: "
                    f"{str(e).splitlines()[0] if str(e) else ''}): the libtorch backend would fail "
                    "to load it"
                )
        return [
            (
                "libtorch",
                problems,
                "config matches the TorchScript forward() (the pytorch backend's load "
                "checks, ported)",
            )
        ]

    def in_process_runner(self, version_dir: Path, model):
        archive = next(
            p for p in (version_dir / "model.pt2", version_dir / "model.pt") if p.is_file()
        )
        return TorchRunner(archive, model)

    def runner_extra(self) -> str:
        return "torch"


BACKEND = PyTorchBackend()
