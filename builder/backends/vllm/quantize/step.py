"""The `vllm.quantize` build step around the INT4 quantizer (`vllm/quantize/writer.py`): the recipe key
(`quantize`), its load-time rules, the planned step (refusals at plan time, where the checkpoint's
config.json and safetensors headers are known) and its run. Imports no numpy until a step is planned
or run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import Field

from tritonbuild.errors import BuildError, PlanError
from tritonbuild.recipe.models import Strict

METHOD = "compressed-tensors"  # vLLM's quantization method for what the step writes
# the step's part of the toolchain: numpy's arithmetic; the quantizer's own version is in its params
TOOLCHAIN = {"vllm.quantize": ("numpy",)}


class VLLMQuantize(Strict):
    """INT4 weight-only at build time: compressed-tensors' W4A16 pack-quantized checkpoint (round to nearest,
    symmetric, one scale per group), which vLLM loads with quantization: compressed-tensors."""

    scheme: Literal["w4a16"] = Field(
        "w4a16", description="w4a16: INT4 weights, 16-bit activations."
    )
    group_size: Literal[32, 64, 128] = Field(
        128,
        description="Inputs per scale; must divide every decoder "
        "linear's in_features (per tensor-parallel rank for o_proj/down_proj).",
    )


def quantize_problems(recipe) -> list:
    """check_recipe's (key path, message, hint) for a VLLMRecipe's quantize: the image's vLLM must
    have compressed-tensors, and engine_args.quantization must be that or unset."""
    from tritonbuild.backends.vllm.versions import quantization_problem

    if recipe.quantize is None:
        return []
    wanted = recipe.engine_args.quantization
    if wanted not in (None, METHOD):
        return [
            (
                ("engine_args", "quantization"),
                f"engine_args.quantization is {wanted!r} but quantize writes a "
                f"{METHOD} checkpoint (W4A16 pack-quantized), which vLLM loads only as {METHOD}",
                f"set engine_args.quantization: {METHOD} (or leave it out), or remove quantize",
            )
        ]
    if wanted is None and (problem := quantization_problem(METHOD, recipe.image.triton_image)):
        return [(("quantize",), f"quantize writes a {METHOD} checkpoint: {problem[0]}", problem[1])]
    return []


def quantize_step(
    loaded, ckpt: Path, config: dict, files: dict[str, str]
) -> tuple[str, dict, dict[str, str]]:
    """The vllm.quantize step of a recipe with quantize: refuses a checkpoint already quantized,
    weights that are not safetensors, and a group size that does not divide a linear's inputs (per
    tensor-parallel rank for the row-parallel ones), each a plan error at the recipe's key."""
    from tritonbuild.backends.vllm.quantize.plan import (
        GROUP_SIZES,
        QUANTIZER_VERSION,
        SHARD_BYTES,
        problems,
        read_header,
        weight_files,
    )

    q = loaded.recipe.quantize
    if "quantization_config" in config:
        method = config["quantization_config"].get("quant_method", "?")
        raise PlanError(
            f"quantize: {ckpt}/config.json already has a quantization_config (quant_method "
            f"{method!r}): the checkpoint is quantized",
            where=loaded.where(("quantize",)),
            hint="remove quantize (vLLM loads the checkpoint as it is), or point checkpoint.path "
            "at the fp16/bf16 checkpoint",
        )
    try:
        weights = weight_files(sorted(files), lambda rel: json.loads((ckpt / rel).read_text()))
        headers = {w: read_header(ckpt / w)[1] for w in weights}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise PlanError(
            f"quantize: cannot read the checkpoint's weights ({type(e).__name__}: {e})",
            where=loaded.where(("checkpoint", "path")),
            hint="check the checkpoint's safetensors",
        ) from None
    if not weights:
        raise PlanError(
            f"quantize: {ckpt} has no *.safetensors weights (found: {', '.join(sorted(files))})",
            where=loaded.where(("checkpoint", "path")),
            hint="save the checkpoint with safe_serialization=True (save_pretrained's default)",
        )
    if bad := problems(headers, q.group_size, loaded.recipe.engine_args.tensor_parallel_size):
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise PlanError(
            f"quantize: {'; '.join(bad[:3])}{more}",
            where=loaded.where(("quantize", "group_size")),
            hint=f"pick a group_size of {', '.join(map(str, GROUP_SIZES))} that divides every "
            "linear's in_features, or leave quantize out",
        )
    params = {
        "scheme": q.scheme,
        "group_size": q.group_size,
        "format": "pack-quantized",
        "quantizer": QUANTIZER_VERSION,
        "shard_bytes": SHARD_BYTES,
        "layout": sorted(files),
    }
    return "vllm.quantize", params, {str(ckpt / k): v for k, v in files.items()}


def weight_bytes(recipe, ckpt: Path, on_disk) -> int:
    """Bytes of the weights vLLM will load: what vllm.quantize writes (from the headers) with
    quantize, else (or where the headers cannot be read) on_disk(ckpt)."""
    from tritonbuild.backends.vllm.quantize.plan import output_bytes, read_header, weight_files

    if recipe.quantize is None:
        return on_disk(ckpt)
    try:
        rels = sorted(p.relative_to(ckpt).as_posix() for p in ckpt.iterdir() if p.is_file())
        weights = weight_files(rels, lambda rel: json.loads((ckpt / rel).read_text()))
        return output_bytes(
            {w: read_header(ckpt / w)[1] for w in weights}, recipe.quantize.group_size
        ) or on_disk(ckpt)
    except (OSError, ValueError, KeyError, TypeError):
        return on_disk(ckpt)


def quantize_run(ctx) -> None:
    """The step: ctx.inputs (the checkpoint's files) → ctx.out/model, the quantized checkpoint."""
    from tritonbuild.backends.common import checkpoint_root
    from tritonbuild.backends.vllm.quantize.plan import FormatError
    from tritonbuild.backends.vllm.quantize.writer import quantize_checkpoint

    root = checkpoint_root(ctx.inputs)
    files = {rel: root / rel for rel in ctx.params["layout"]}
    try:
        quantize_checkpoint(
            files, ctx.out / "model", ctx.params["group_size"], ctx.params["shard_bytes"]
        )
    except (FormatError, KeyError) as e:
        raise BuildError(
            f"cannot quantize the checkpoint {root}: {e}",
            hint="check the checkpoint's safetensors "
            "(the plan read their headers; did they change since?)",
        ) from None
