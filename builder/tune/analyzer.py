"""A recipe's serving space as a Model Analyzer `profile` config (YAML): the max_batch_size values,
dynamic batcher delays, preferred sizes and instance counts/kinds `tritonbuild tune` would try, as a
manual sweep (run_config_search_disable) of `profile_models.<name>.model_config_parameters`.

The format is Model Analyzer's (docs/config.md, config_command_profile.py; the facts and their lines
are in tests/contracts/facts/model_analyzer.json): model_config_parameters take ModelConfig's own
field names (its schema is built from the ModelConfig protobuf), a list sweeps a value, and a field
that is a list in ModelConfig (instance_group, preferred_batch_size) sweeps only as a list of lists.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from tritonbuild.core.fsutil import write_atomic
from tritonbuild.core.results import Result
from tritonbuild.errors import UsageError
from tritonbuild.recipe.models import Recipe, Tune
from tritonbuild.triton.batching import FIELDS
from tritonbuild.tune.space import KINDS, default_batch_sizes


def _batching(recipe: Recipe, tune: Tune, notes: list[str]) -> dict:
    """max_batch_size and dynamic_batching sweeps (nothing when the model does not batch)."""
    if recipe.max_batch_size == 0:
        return {}
    sizes = sorted(
        {
            b
            for b in (tune.batch_sizes or default_batch_sizes(recipe.max_batch_size))
            if b <= recipe.max_batch_size
        }
    )
    batcher: dict = {FIELDS["max_queue_delay_us"]: sorted(set(tune.max_queue_delay_us))}
    if True in tune.preferred_batch_sizes:
        if len(sizes) == 1 and False not in tune.preferred_batch_sizes:
            batcher[FIELDS["preferred_batch_sizes"]] = [[sizes[0]]]
        else:
            notes.append(
                "preferred_batch_sizes [max_batch_size] is left out: Model Analyzer sweeps "
                "preferred_batch_size apart from max_batch_size and cannot tie the two"
            )
    notes.append(
        "the candidates without a dynamic batcher are left out: Model Analyzer's manual sweep sets "
        "dynamic_batching on every config it makes"
    )
    return {"max_batch_size": sizes, "dynamic_batching": batcher}


def _instances(recipe: Recipe, tune: Tune) -> list[list[dict]]:
    """instance_group as a sweep: one single-group list per count (kind and GPUs as tune would
    use)."""
    kind = tune.instance_kind or (recipe.instances[0].kind if recipe.instances else "cpu")
    gpus = None
    if kind == "gpu" and tune.gpus_per_group:
        gpus = list(range(max(tune.gpus_per_group)))
    elif recipe.instances and recipe.instances[0].gpus:
        gpus = list(recipe.instances[0].gpus)
    groups = []
    for count in sorted(set(tune.instance_counts)):
        group: dict = {"kind": KINDS[kind], "count": count}
        if gpus is not None:
            group["gpus"] = gpus
        groups.append([group])
    return groups


def profile_model(recipe: Recipe, *, input_data: str | None = None) -> tuple[dict, list[str]]:
    """One `profile_models` entry for RECIPE's tune space (the defaults when it has no tune
    section)."""
    tune = recipe.tune or Tune()
    notes: list[str] = []
    parameters = {**_batching(recipe, tune, notes), "instance_group": _instances(recipe, tune)}
    entry: dict = {
        "model_config_parameters": parameters,
        "parameters": {"concurrency": sorted(set(tune.concurrency)), "batch_sizes": [1]},
    }
    if tune.request_rates:
        notes.append(
            "tune.request_rates are left out: Model Analyzer measures either concurrency or "
            "request rate, and tune's concurrency is kept"
        )
    if tune.sla_p99_ms is not None:
        limit = max(
            1, math.floor(tune.sla_p99_ms)
        )  # Model Analyzer's perf_latency_p99 max is an int (ms)
        entry["constraints"] = {"perf_latency_p99": {"max": limit}}
        if limit != tune.sla_p99_ms:
            notes.append(
                f"tune.sla_p99_ms {tune.sla_p99_ms} is written as {limit}: Model Analyzer takes "
                "whole ms"
            )
    if input_data is not None:
        entry["perf_analyzer_flags"] = {"input-data": input_data}
    return entry, notes


def profile_config(
    recipes: list[Recipe], model_repository: str, *, input_data: dict[str, str] | None = None
) -> tuple[dict, dict[str, list[str]]]:
    """The whole `model-analyzer profile -f` document, and per model what of tune's space it could
    not say."""
    models, notes = {}, {}
    for recipe in recipes:
        models[recipe.name], notes[recipe.name] = profile_model(
            recipe, input_data=(input_data or {}).get(recipe.name)
        )
    return {
        "model_repository": model_repository,
        "run_config_search_disable": True,
        "profile_models": models,
    }, notes


def _tunable(recipes: list) -> tuple[list[Recipe], dict[str, list[str]]]:
    """The single-model recipes (those with a serving space); pipelines and LLM groups are left out,
    as tune leaves them, with a note, and refused when nothing else is given."""
    tunable = [recipe for recipe in recipes if isinstance(recipe, Recipe)]
    skipped = {
        recipe.name: [
            f"left out: its {recipe.backend} recipe has no serving space of its own (tune serves "
            "one model's config); profile the models it calls"
        ]
        for recipe in recipes
        if not isinstance(recipe, Recipe)
    }
    if not tunable:
        raise UsageError(
            f"{', '.join(sorted(skipped))}: a pipeline or LLM recipe has no serving space of its "
            "own to profile",
            hint="give the recipes of the models it calls",
        )
    return tunable, skipped


@dataclass(frozen=True)
class ProfileExport(Result):
    """export model-analyzer: the profile config written, its models, notes per model, the command
    that runs it."""

    path: str
    models: list[str]
    notes: dict[str, list[str]]
    model_analyzer: str


def write_profile_config(
    recipes: list[Recipe],
    out: Path,
    *,
    model_repository: str,
    input_data: dict[str, str] | str | None = None,
) -> ProfileExport:
    """profile_config written to OUT (atomically); input_data a bare path: the one recipe's."""
    if isinstance(input_data, str):
        if len(recipes) != 1:
            raise UsageError(
                f"--input-data {input_data} names no model, and {len(recipes)} recipes are given",
                hint="write --input-data MODEL=FILE for each model",
            )
        input_data = {recipes[0].name: input_data}
    recipes, skipped = _tunable(recipes)
    unknown = sorted(set(input_data or {}) - {recipe.name for recipe in recipes})
    if unknown:
        raise UsageError(
            f"--input-data names {', '.join(unknown)}, which no recipe given defines",
            hint=f"use MODEL=FILE with one of: {', '.join(r.name for r in recipes)}",
        )
    document, notes = profile_config(recipes, model_repository, input_data=input_data)
    notes.update(skipped)
    write_atomic(out, yaml.safe_dump(document, sort_keys=False).encode())
    return ProfileExport(
        path=str(out),
        models=sorted(document["profile_models"]),
        notes=notes,
        model_analyzer=f"model-analyzer profile -f {out}",
    )
