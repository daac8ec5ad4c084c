"""An onnxruntime model's execution accelerators (config.pbtxt's
optimization.execution_accelerators: TensorRT or CUDA on the GPU, OpenVINO on the CPU): the recipe
key `accelerators`, what the server can honour, the config it writes and the recipe adopt reads back
from an existing config."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from tritonbuild.recipe.models import Recipe, Strict


class TRTAccelerator(Strict):
    name: Literal["tensorrt"]
    precision_mode: Literal["FP32", "FP16", "INT8"] = "FP16"
    max_workspace_size_bytes: int = Field(1 << 30, ge=1 << 20)
    trt_engine_cache_enable: bool = True
    trt_engine_cache_path: str | None = Field(
        None, description="Absolute path on the server (engines are per GPU and TensorRT version)."
    )


class CudaAccelerator(Strict):
    name: Literal["cuda"]


class OpenVINOAccelerator(Strict):
    name: Literal["openvino"]


class Accelerators(Strict):
    gpu: list[Annotated[TRTAccelerator | CudaAccelerator, Field(discriminator="name")]] = Field(
        default_factory=list
    )
    cpu: list[OpenVINOAccelerator] = Field(default_factory=list)


def add_accelerators(mc, accelerators: Accelerators) -> None:
    """onnxruntime's execution providers (TensorRT, CUDA, OpenVINO) into the config's
    optimization."""
    ea = mc.optimization.execution_accelerators
    for acc in accelerators.gpu:
        a = ea.gpu_execution_accelerator.add()
        a.name = acc.name
        for k, v in sorted(acc.model_dump(exclude={"name"}, exclude_none=True).items()):
            a.parameters[k] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    for acc in accelerators.cpu:
        ea.cpu_execution_accelerator.add().name = acc.name


def accelerator_problems(recipe: Recipe) -> list[tuple]:
    """Execution accelerators the server can honour."""
    out = []
    accelerators = recipe.accelerators
    if accelerators is None:
        return out
    if accelerators.gpu and recipe.target == "cpu":
        out.append(
            (
                ("accelerators", "gpu"),
                "GPU execution accelerators on a cpu target",
                "set target: gpu or remove accelerators.gpu",
            )
        )
    for i, accelerator in enumerate(accelerators.gpu):
        cache_path = getattr(accelerator, "trt_engine_cache_path", None)
        if cache_path and not cache_path.startswith("/"):
            out.append(
                (
                    ("accelerators", "gpu", i, "trt_engine_cache_path"),
                    "must be an absolute path on the server",
                    "use e.g. /tmp/ort-trt-cache",
                )
            )
        if accelerator.name == "tensorrt" and accelerator.precision_mode == "INT8":
            out.append(
                (
                    ("accelerators", "gpu", i, "precision_mode"),
                    "INT8 needs a calibration table, which tritonbuild does not ship",
                    "use FP16 or FP32",
                )
            )
    return out


_TRT_PARAMETERS = {
    "precision_mode": str,
    "max_workspace_size_bytes": int,
    "trt_engine_cache_path": str,
    "trt_engine_cache_enable": lambda v: v.lower() == "true",
}


def adopt_accelerators(mc) -> dict:
    """optimization.execution_accelerators of an existing config as the recipe's accelerators
    (tritonbuild adopt); any other optimization field, accelerator or parameter is refused by
    name."""
    from tritonbuild.errors import UsageError

    if not mc.HasField("optimization"):
        return {}
    other = [
        f"optimization.{field.name}"
        for field, _ in mc.optimization.ListFields()
        if field.name != "execution_accelerators"
    ]
    ea, out = mc.optimization.execution_accelerators, {"gpu": [], "cpu": []}
    for a in ea.gpu_execution_accelerator:
        params = {k: _TRT_PARAMETERS[k](v) for k, v in a.parameters.items() if k in _TRT_PARAMETERS}
        other += [
            f"gpu accelerator {a.name} parameter {k}"
            for k in a.parameters
            if k not in params or a.name != "tensorrt"
        ]
        out["gpu"].append({"name": a.name, **params})
    out["cpu"] = [{"name": a.name} for a in ea.cpu_execution_accelerator]
    other += [
        f"accelerator {a['name']}"
        for kind in ("gpu", "cpu")
        for a in out[kind]
        if a["name"] not in (("tensorrt", "cuda") if kind == "gpu" else ("openvino",))
    ]
    if other:
        raise UsageError(
            f"{mc.name}: {sorted(other)} have no recipe key yet",
            hint="publish the repository as it is ('tritonbuild publish DIR URL')",
        )
    return {"accelerators": {kind: items for kind, items in out.items() if items}}
