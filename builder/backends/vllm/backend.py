"""vLLM backend: the checkpoint packaged in the version directory (or quantized into it), model.json
with typed engine args, config.pbtxt as the vLLM backend expects it (decoupled, max_batch_size 0,
KIND_MODEL). The recipe type is in `recipe.py`, what the repository holds in `emit.py`, the
memory plan in `memory.py`."""

from __future__ import annotations

import json
from pathlib import Path

from tritonbuild.backends.base import Backend, PlanContext, StepContext
from tritonbuild.backends.common import copy_inputs
from tritonbuild.backends.llm.checkpoint import read_checkpoint, recipe_dir
from tritonbuild.backends.llm.memory import Architecture, tp_heads_problem
from tritonbuild.backends.vllm.emit import INPUTS, OUTPUTS, emit, model_json
from tritonbuild.backends.vllm.extra import extra_problems
from tritonbuild.backends.vllm.invariant import checks as invariance
from tritonbuild.backends.vllm.invariant import shapes as invariant_shapes
from tritonbuild.backends.vllm.invariant import wheel as invariant
from tritonbuild.backends.vllm.lora import cross_key_problems, lora_step, rank_problem
from tritonbuild.backends.vllm.memory import describe
from tritonbuild.backends.vllm.quantize import step as quant
from tritonbuild.backends.vllm.recipe import TYPED_ENGINE_ARGS, VLLMRecipe
from tritonbuild.backends.vllm.rules import load_problems
from tritonbuild.backends.vllm.speculative import draft_step, speculative_problem
from tritonbuild.backends.vllm.versions import (
    checkpoint_methods,
    engine_args_problems,
    quantization_problem,
)
from tritonbuild.errors import PlanError, RecipeError
from tritonbuild.recipe.load import LoadedRecipe

NAME = "vllm"
DEFAULT_FILENAME = "model.json"
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


def plan_steps(loaded: LoadedRecipe, ctx: PlanContext) -> list[tuple[str, dict, dict[str, str]]]:
    ckpt, config, files = read_checkpoint(loaded, ctx)
    if problem := invariance.checkpoint_problem(loaded.recipe, config):
        raise RecipeError(
            f"checkpoint.path: {problem[0]}",
            where=loaded.where(("checkpoint", "path")),
            hint=problem[1],
        )
    if problem := invariant_shapes.layer_problem(loaded.recipe, config):
        key, message, hint = problem
        raise RecipeError(f"{'.'.join(key)}: {message}", where=loaded.where(key), hint=hint)
    tp = loaded.recipe.engine_args.tensor_parallel_size
    if (heads := tp_heads_problem(Architecture.from_hf_config(config), tp)) is not None:
        raise RecipeError(
            f"engine_args.tensor_parallel_size: {heads}",
            where=loaded.where(("engine_args", "tensor_parallel_size")),
            hint="pick a tensor_parallel_size that divides the heads, or use "
            "pipeline_parallel_size",
        )
    if not (ckpt / "tokenizer.json").is_file() and not (ckpt / "tokenizer_config.json").is_file():
        raise PlanError(
            f"{ckpt} has no tokenizer files",
            where=loaded.where(("checkpoint", "path")),
            hint="save the tokenizer into the checkpoint directory (vLLM loads it from there)",
        )

    weights = (  # what is packaged
        quant.quantize_step(loaded, ckpt, config, files)
        if loaded.recipe.quantize
        else (
            "vllm.package",
            {"layout": sorted(files)},
            {str(ckpt / k): v for k, v in files.items()},
        )
    )
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
            f"engine_args.quantization is {wanted!r} but the checkpoint has no "
            "quantization_config: vLLM quantizes only checkpoints written in that format",
            hint="point checkpoint.path at the quantized checkpoint, or remove "
            "engine_args.quantization",
            where=loaded.where(("engine_args", "quantization")),
        )


def golden_inputs(model) -> list[dict]:
    """The requests verify sends and records: for each prompt, the input set Triton's OpenAI
    frontend sends a vLLM model (tests/contracts/facts/clients.json), not streamed and streamed,
    greedy, with the log-probs of the chosen tokens, so goldens pin token ids and log-probs bit for
    bit."""
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

    def served_check(self, model, log: str | None) -> tuple[list[str], str | None]:
        from tritonbuild.backends.vllm.invariant.served import served_check

        return served_check(model, log)

    def check_recipe(self, recipe) -> list:
        problems = quant.quantize_problems(recipe)
        if problem := quantization_problem(
            recipe.engine_args.quantization, recipe.image.triton_image
        ):
            problems.append((("engine_args", "quantization"), *problem))
        if problem := rank_problem(recipe.lora, recipe.image.triton_image):
            problems.append((("lora", "max_lora_rank"), *problem))
        problems += cross_key_problems(recipe)
        if problem := speculative_problem(recipe.speculative, recipe.image.triton_image):
            problems.append((("speculative", "method"), *problem))
        if problem := invariant.determinism_problem(recipe):
            problems.append((("serving", "determinism"), *problem))
        problems += invariance.recipe_problems(recipe)
        extra = recipe.engine_args.extra
        problems += extra_problems(extra, recipe.image.triton_image, set(TYPED_ENGINE_ARGS))
        # extra's own keys were checked above
        keys = set(model_json(recipe)) - {"model"} - (set(extra) - TYPED_ENGINE_ARGS)
        return problems + engine_args_problems(
            keys, recipe.image.triton_image, set(TYPED_ENGINE_ARGS)
        )

    def emit(self, built_model, root: Path, store, manifest_model, built: dict) -> list:
        return emit(built_model, root, store, manifest_model)

    def adopt_recipe(self, mc, model_dir: Path, out: Path) -> tuple[dict, int]:
        from tritonbuild.backends.vllm.adopt import adopt_vllm

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
