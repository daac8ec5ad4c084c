"""vLLM LoRA: the recipe key `lora` (`VLLMLoRA`), the `vllm.lora` step that packages its PEFT
adapters by content, and what vLLM's LoRA takes, per recorded vLLM version (the package's
facts/vllm_lora.json, derived from each wheel by `python -m tests.contracts.refresh vllm-wheel
WHEEL... --write`): max_lora_rank is one of MaxLoRARanks
(another value fails LoRAConfig at engine start), and an adapter whose rank (adapter_config.json
`r`) exceeds max_lora_rank (LoRAConfig's default when unset) is refused by PEFTHelper.validate_legal
on every request that names it, the server up. Both are refused here, before a build: a rank vLLM
lacks as a recipe error (`rank_problem`, from check_recipe), an adapter over the limit as a plan
error (`lora_step`). An image whose vLLM's ranks are not recorded refuses an explicit max_lora_rank
(that vLLM may not take it: 0.10.2 has no rank 1, 0.5.5 no 320 or 512) and plans adapters against the
default every recorded vLLM has. LoRAConfig's cross-key rule, max_cpu_loras (engine_args.extra) >=
max_loras, is a recipe error too (`cross_key_problems`)."""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import Field

from tritonbuild.backends.vllm.versions import image_vllm, images_where
from tritonbuild.core import facts
from tritonbuild.errors import PlanError
from tritonbuild.recipe.models import Strict


def recorded() -> dict[str, tuple[tuple[int, ...], int]]:
    """Per recorded vLLM version (oldest first): (the values max_lora_rank takes, its default) --
    MaxLoRARanks (possible_max_ranks before 0.11) and the default the engine gets, as facts/
    vllm_lora.json records them."""
    return {
        v: (tuple(f["max_lora_ranks"]), f["default_max_lora_rank"])
        for v, f in facts.load("vllm_lora")["versions"].items()
    }


# the ranks the recipe schema lists: those of any recorded vLLM
RANKS_IN_SOME_RECORDED = tuple(sorted({r for ranks, _ in recorded().values() for r in ranks}))


class VLLMLoRA(Strict):
    adapters: dict[str, str] = Field(
        min_length=1,
        description="LoRA name (the request's sampling parameter "
        "lora_name; the OpenAI frontend's <model><separator><name>) → a PEFT adapter "
        "directory (adapter_config.json + weights); content-hashed, packaged.",
    )
    max_lora_rank: (
        Annotated[int, Field(json_schema_extra={"enum": list(RANKS_IN_SOME_RECORDED)})] | None
    ) = Field(
        None,
        ge=1,
        description="vLLM's max_lora_rank, one of the image's vLLM's MaxLoRARanks (unset: vLLM's "
        "default, 16); at least every adapter's rank (adapter_config.json r). Refused on an image "
        "whose vLLM's ranks tritonbuild has not recorded.",
    )
    max_loras: int | None = Field(
        None, ge=1, description="vLLM's max_loras (unset: vLLM's default)."
    )


def _ranks(triton_image: str) -> tuple[str, tuple[int, ...], int]:
    """(what the values are of, the ranks the image's vLLM takes, its default max_lora_rank)."""
    version, table = image_vllm(triton_image), recorded()
    if version in table:
        return f"vLLM {version}", *table[version]
    return (
        f"every recorded vLLM ({', '.join(table)}; that of {triton_image} is not)",
        tuple(sorted(set.intersection(*(set(ranks) for ranks, _ in table.values())))),
        min(default for _, default in table.values()),
    )


def rank_problem(lora: VLLMLoRA | None, triton_image: str) -> tuple[str, str] | None:
    """(message, hint) when lora.max_lora_rank is not one of the ranks the image's vLLM takes, or
    that vLLM's ranks are not recorded, else None."""
    if lora is None or lora.max_lora_rank is None:
        return None
    version, table = image_vllm(triton_image), recorded()
    if version not in table:
        return (
            f"max_lora_rank {lora.max_lora_rank}: the ranks "
            f"{'vLLM ' + version if version else 'the vLLM of ' + triton_image} takes are not "
            "recorded (tritonbuild's facts/vllm_lora.json; they differ between releases: 0.5.5 "
            "has no 320 or 512, 0.10.2 no 1), so tritonbuild cannot tell whether its engine starts",
            f"remove lora.max_lora_rank (that vLLM's default, {_ranks(triton_image)[2]}), or use an "
            f"image whose vLLM is recorded: {images_where(lambda v: v in table)}",
        )
    what, ranks, _default = _ranks(triton_image)
    if lora.max_lora_rank in ranks:
        return None
    above = [r for r in ranks if r > lora.max_lora_rank]
    return (
        f"max_lora_rank {lora.max_lora_rank} is not a rank {what} takes (its MaxLoRARanks): the "
        "engine refuses to start",
        f"use one of {', '.join(map(str, ranks))}"
        + (f" (the next above is {above[0]})" if above else ""),
    )


def _adapter_rank(loaded, name: str, config_path) -> None:
    """A PlanError when the adapter's rank exceeds the max_lora_rank vLLM will run with."""
    try:
        rank = json.loads(config_path.read_text()).get("r")
    except (OSError, ValueError, AttributeError):
        return  # vLLM's own error at load names the file; nothing to compare
    lora, image = loaded.recipe.lora, loaded.recipe.image.triton_image
    _what, ranks, default = _ranks(image)
    limit = lora.max_lora_rank or default
    if isinstance(rank, int) and rank > limit:
        fits = [r for r in ranks if r >= rank]
        set_by = (
            "lora.max_lora_rank"
            if lora.max_lora_rank
            else "vLLM's default max_lora_rank (lora.max_lora_rank unset)"
        )
        raise PlanError(
            f"LoRA adapter {name!r} has rank {rank} (adapter_config.json r) but {set_by} is "
            f"{limit}: vLLM refuses every request to it ('LoRA rank ... is greater than "
            "max_lora_rank')",
            where=loaded.where(
                ("lora", "max_lora_rank") if lora.max_lora_rank else ("lora", "adapters", name)
            ),
            hint=f"set lora.max_lora_rank to {fits[0]} (a rank vLLM takes, >= {rank})"
            if fits
            else f"no rank vLLM takes is >= {rank} (at most {ranks[-1]}): retrain the adapter with "
            "a lower r",
        )


def lora_step(loaded, ctx, recipe_dir) -> list[tuple[str, dict, dict[str, str]]]:
    """The recipe's PEFT adapters, keyed by content (paths out of the key)."""
    from tritonbuild.backends.common import tree_inputs

    r = loaded.recipe
    if r.lora is None:
        return []
    adapters, inputs = {}, {}
    for name, rel in r.lora.adapters.items():
        d = recipe_dir(loaded, rel, ("lora", "adapters", name))
        if not (d / "adapter_config.json").is_file():
            raise PlanError(
                f"LoRA adapter {name!r} at {d} has no adapter_config.json: not a PEFT adapter",
                where=loaded.where(("lora", "adapters", name)),
                hint="save the adapter with peft's save_pretrained(DIR)",
            )
        _adapter_rank(loaded, name, d / "adapter_config.json")
        adapters[name], files = tree_inputs(d, ctx)
        inputs.update(files)
    return [("vllm.lora", {"adapters": adapters}, inputs)]


def _cpu_rule(triton_image: str) -> bool:
    """Whether the image's vLLM has LoRAConfig's max_cpu_loras >= max_loras rule (facts:
    max_cpu_loras_rule; not recorded: whether every recorded vLLM has it)."""
    version, table = image_vllm(triton_image), facts.load("vllm_lora")["versions"]
    rules = [table[version]] if version in table else table.values()
    return all(f["max_cpu_loras_rule"] is not None for f in rules)


def cross_key_problems(recipe) -> list:
    """(key path, message, hint) for LoRAConfig's cross-key rule: max_cpu_loras (engine_args.extra)
    at least max_loras (lora.max_loras, vLLM's default 1), else the engine refuses to start
    (vllm/config/lora.py _validate_lora_config; facts: max_cpu_loras_rule, where the image's vLLM
    has it)."""
    cpu = recipe.engine_args.extra.get("max_cpu_loras")
    if recipe.lora is None or not isinstance(cpu, int) or isinstance(cpu, bool):
        return []
    if not _cpu_rule(recipe.image.triton_image):
        return []
    loras = recipe.lora.max_loras or 1
    if cpu >= loras:
        return []
    return [
        (
            ("engine_args", "extra", "max_cpu_loras"),
            f"max_cpu_loras {cpu} is below max_loras {loras}"
            + ("" if recipe.lora.max_loras else " (vLLM's default)")
            + f": vLLM's LoRAConfig refuses it at engine start ('max_cpu_loras ({cpu}) must be >= "
            f"max_loras ({loras})')",
            f"set engine_args.extra.max_cpu_loras to at least {loras} (or remove it: it then "
            "takes max_loras)",
        )
    ]
