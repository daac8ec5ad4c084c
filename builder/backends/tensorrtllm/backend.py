"""The TensorRT-LLM backend as registered: the engine group (tensorrtllm C++ backend) or, for
runtime: pytorch, the LLM-API Python model."""

from __future__ import annotations

import re
from pathlib import Path

from tritonbuild.backends.base import Backend
from tritonbuild.backends.tensorrtllm import group
from tritonbuild.backends.tensorrtllm.checks.recipe import check_recipe
from tritonbuild.backends.tensorrtllm.llmapi import emit as llmapi
from tritonbuild.backends.tensorrtllm.plan import describe, plan_steps
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
from tritonbuild.backends.tensorrtllm.run import run_step
from tritonbuild.core.toolchain import GPU_KEYS

NAME = "tensorrtllm"


def emit(built_model, root: Path, store, manifest_model) -> list:
    if built_model.plan.recipe.runtime == "pytorch":
        return llmapi.emit(built_model, root, store, manifest_model)
    return group.emit(built_model, root, store, manifest_model)


class TensorRTLLMBackend(Backend):
    name = NAME
    recipe_type = LLMRecipe
    step_toolchain = {
        "trtllm.engine": ("tritonbuild", "tensorrt_llm", "tensorrt", *GPU_KEYS),
        "trtllm.quantize": ("tritonbuild", "tensorrt_llm", *GPU_KEYS),
        "trtllm.tokenizer": ("tritonbuild",),
        "trtllm.checkpoint": ("tritonbuild",),
        "trtllm.lora": ("tritonbuild",),
        "trtllm.draft": ("tritonbuild",),
    }
    tools = {"tensorrt_llm": "tensorrt_llm", "tensorrt": "tensorrt"}
    # GPU-bound: --engine supplies one, --matrix routes it
    engine_steps = ("trtllm.engine", "trtllm.quantize")
    triton_backend = "tensorrtllm"
    model_files = {"": ""}
    # TensorRT engines and what their build writes beside
    unreproducible_files = ("*.engine", "*/engine/*")
    also_writes = ("python",)  # runtime: pytorch writes an LLM-API Python model (model.yaml)
    route = "live-server"  # needs the tensorrtllm backend on a GPU server
    needs = "GPU/TRT-LLM"
    emits = True

    plan_steps = staticmethod(plan_steps)
    run_step = staticmethod(run_step)
    describe = staticmethod(describe)
    check_recipe = staticmethod(check_recipe)

    def derive_io(self, recipe, files: dict[str, Path], recipe_dir=None):
        return [], []  # the group's tensors are in the configs it writes (emit)

    def step_timeout(self, recipe, kind: str) -> int | None:
        return recipe.engine.timeout_s if kind in ("trtllm.engine", "trtllm.quantize") else None

    def emit(self, built_model, root: Path, store, manifest_model, built: dict) -> list:
        return emit(built_model, root, store, manifest_model)

    def offline_checks(
        self, mc, model_dir: Path, versions: list[int]
    ) -> list[tuple[str, list[str], str]]:
        """What the C++ backend's ModelInstanceState reads without a default (a repository built
        before #9, or hand-edited, fails to load otherwise)."""
        from tritonbuild.backends.tensorrtllm.checks.load import parameter_problems
        from tritonbuild.backends.tensorrtllm.parameters import UNGUARDED, UNGUARDED_VALUES

        params = {k: v.string_value for k, v in mc.parameters.items()}
        return [
            (
                "tensorrtllm.parameters",
                parameter_problems(params, UNGUARDED, UNGUARDED_VALUES),
                "every parameter the backend reads unguarded is set",
            )
        ]

    def gpus_needed(self, mc, version_dir: Path) -> int:
        """The C++ backend places its own devices (gpu_device_ids, '0,1;2,3'); its instance kind
        stays CPU."""
        param = mc.parameters.get("gpu_device_ids")
        ids = (
            [int(gpu) for gpu in re.findall(r"\d+", param.string_value)]
            if param is not None
            else []
        )
        return max(ids) + 1 if ids else 0

    def model_file_checks(
        self, mc, model_dir: Path, versions: list[int]
    ) -> list[tuple[str, list[str], str]]:
        """The engine group's model: its engine inside the version directory; an LLM-API Python
        model: its model.yaml against config.pbtxt; any other Python model is not ours ([])."""
        from tritonbuild.backends.tensorrtllm.checks import load as load_rules

        if mc.backend == self.triton_backend:
            return [
                (
                    "model_file",
                    load_rules.engine_problems(mc, model_dir, versions),
                    "engine inside the version directory",
                )
            ]
        if load_rules.is_llmapi_model(model_dir, versions):
            return [
                (
                    "llmapi",
                    load_rules.llmapi_problems(mc, model_dir, versions),
                    "model.yaml consistent with config.pbtxt",
                )
            ]
        return []

    def adopt_members(self, mc, model_dir: Path) -> list[str]:
        from tritonbuild.backends.tensorrtllm.adopt import group_of

        return sorted(group_of(model_dir).values()) if mc.backend == self.triton_backend else []

    def adopt_recipe(self, mc, model_dir: Path, out: Path) -> tuple[dict, int] | None:
        from tritonbuild.backends.tensorrtllm.adopt import adopt_group

        return adopt_group(mc, model_dir, out) if mc.backend == self.triton_backend else None


BACKEND = TensorRTLLMBackend()
