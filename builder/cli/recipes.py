"""validate, plan, build, schema, adopt."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from tritonbuild import api
from tritonbuild.cli.app import app
from tritonbuild.cli.common import (
    _json,
    _progress,
    cache_dir_option,
    cache_url_option,
    changed_since_option,
    json_option,
    key_values,
    main,
    print_table,
    recipes_arg,
    triton_image_option,
)
from tritonbuild.errors import VerifyError


@main.command("validate")
@recipes_arg
@cache_dir_option
@triton_image_option
@json_option
def validate_command(
    recipes: tuple[Path, ...], cache_dir: Path | None, triton_image: str | None, as_json: bool
) -> None:
    """Check recipe files (or folders of them) as build does before building (their keys, their
    source files, the Python files' syntax at the target's Python), without building anything."""
    loaded = api.validate(
        list(recipes), cache_dir=cache_dir, serving=api.ServingTarget(triton_image=triton_image)
    )
    if as_json:
        _json(
            {
                "valid": [
                    {
                        "path": str(loaded_recipe.path),
                        "name": loaded_recipe.recipe.name,
                        "version": loaded_recipe.recipe.version,
                    }
                    for loaded_recipe in loaded
                ]
            }
        )
        return
    for loaded_recipe in loaded:
        recipe = loaded_recipe.recipe
        app().out.print(
            f"ok  {loaded_recipe.path}  ({recipe.name} v{recipe.version}, {recipe.backend})"
        )


@main.command("plan")
@recipes_arg
@click.option(
    "--matrix",
    "matrix",
    type=click.Choice(["github", "gitlab"]),
    default=None,
    flag_value="github",
    is_flag=False,
    help="Print a CI matrix of the recipes that need building (github: {include: [...]}, "
    "gitlab: {parallel: {matrix: [...]}}).",
)
@cache_dir_option
@cache_url_option
@changed_since_option
@json_option
def plan_command(
    recipes: tuple[Path, ...],
    matrix: str | None,
    cache_dir: Path | None,
    cache_url: str | None,
    changed_since: str | None,
    as_json: bool,
) -> None:
    """Show what would be built: steps, their inputs and cache keys, the toolchain, LLM memory
    plans."""
    if matrix:
        entries = api.build_matrix(
            list(recipes), cache_dir=cache_dir, cache_url=cache_url, changed_since=changed_since
        )
        if matrix == "github":
            click.echo(
                json.dumps({"include": [entry.to_dict() for entry in entries]}, sort_keys=True)
            )
        else:
            click.echo(
                json.dumps(
                    {"parallel": {"matrix": [{"RECIPE": e.recipe, "GPU": e.gpu} for e in entries]}},
                    sort_keys=True,
                )
            )
        return
    plan = api.plan(list(recipes), cache_dir=cache_dir)
    if as_json:
        _json(plan.model_dump(mode="json"))
        return
    table = Table("model", "version", "backend", "step", "cache key", box=None)
    for model_plan in plan.models:
        for step in model_plan.steps:
            table.add_row(
                model_plan.name,
                str(model_plan.version),
                model_plan.backend,
                step.kind,
                step.cache_key[:16],
            )
    print_table(table)
    for model_plan in plan.models:
        if route := model_plan.extras.get("route"):
            app().out.print(f"{model_plan.name}: {route['name']} — {route['why']}")
        mem = model_plan.extras.get("memory_plan")
        if mem:
            _render_memory(model_plan.name, model_plan.extras.get("architecture", {}), mem)
    app().out.print(
        "toolchain: " + ", ".join(f"{k} {v}" for k, v in sorted(plan.toolchain.items()))
    )


def _render_memory(name: str, arch: dict, mem: dict) -> None:
    gib, mib = 1 << 30, 1 << 20
    t = Table(
        title=f"{name}: GPU memory plan ({mem['gpu']}, {mem['gpu_bytes'] / gib:.1f} GiB)",
        box=None,
        show_header=False,
    )
    t.add_row(
        "architecture",
        f"{arch.get('model_type')} {arch.get('layers')} layers, hidden {arch.get('hidden')}, "
        f"{arch.get('heads')} heads / {arch.get('kv_heads')} KV heads × {arch.get('head_dim')}",
    )
    t.add_row("parameters", f"{mem['params']:,}")
    t.add_row(
        f"weights ({mem['quantization']})",
        f"{mem['weight_bytes'] / gib:.2f} GiB total, "
        f"{mem['weight_bytes_per_gpu'] / gib:.2f} GiB per GPU",
    )
    t.add_row(
        "KV cache per token",
        f"{mem['kv_bytes_per_token'] / mib:.4f} MiB ({mem['kv_bytes_per_token']} bytes)",
    )
    t.add_row(
        "KV pool per GPU",
        f"{mem['kv_pool_bytes_per_gpu'] / gib:.2f} GiB → {mem['max_kv_tokens']:,} tokens",
    )
    t.add_row("sequences at max_seq_len", str(mem["max_sequences_at_max_seq_len"]))
    app().out.print(t)
    for note in mem["notes"]:
        app().out.print(f"  note: {note}")


@main.command("build")
@recipes_arg
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    type=click.Path(path_type=Path),
    help="Repository directory to write (replaced atomically).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace OUT even if it is not a tritonbuild repository (never one that overlaps an "
    "input).",
)
@click.option(
    "--engine",
    "engines",
    multiple=True,
    metavar="MODEL=DIR",
    help="Assemble MODEL around this prebuilt engine directory instead of building it. Repeatable.",
)
@click.option(
    "--strict", is_flag=True, help="A step that cannot run here (e.g. no TensorRT-LLM) is an error."
)
@cache_dir_option
@cache_url_option
@changed_since_option
@triton_image_option
@json_option
def build_command(
    recipes: tuple[Path, ...],
    output: Path,
    force: bool,
    engines: tuple[str, ...],
    strict: bool,
    cache_dir: Path | None,
    cache_url: str | None,
    changed_since: str | None,
    triton_image: str | None,
    as_json: bool,
) -> None:
    """Build a Triton model repository from recipes (files or folders of *.yaml)."""
    given = {
        name: Path(path) for name, path in key_values(engines, "--engine", "MODEL=DIR").items()
    }

    app().detail(
        f"build cache {cache_dir}"
        + (f", remote cache {api.redact(cache_url)}" if cache_url else "")
    )
    with _progress(not as_json) as progress:
        result, manifest = api.build_repository(
            list(recipes),
            output,
            force=force,
            cache_dir=cache_dir,
            progress=progress,
            engines=given,
            strict=strict,
            cache_url=cache_url,
            changed_since=changed_since,
            serving=api.ServingTarget(triton_image=triton_image),
        )
    for warning in result.warnings:
        app().err.print(f"[yellow]warning[/]: {escape(warning)}", markup=True)
    if as_json:
        _json(_build_json(output, result, manifest))
        return
    _print_build(output, result, manifest)


def _build_json(output: Path, result, manifest) -> dict:
    """OUT, the manifest's digest, the warnings, each model's step outcomes."""
    return {
        "output": str(output),
        "manifest_digest": manifest.digest,
        "warnings": result.warnings,
        "models": [
            {
                "name": built.plan.name,
                "version": built.plan.version,
                "steps": [outcome.model_dump() for outcome in built.steps],
            }
            for built in result.models
        ],
    }


def _print_build(output: Path, result, manifest) -> None:
    """One row per step (built, cached, skipped and why), then what was written."""
    table = Table("model", "version", "step", "status", "why", "seconds", box=None)
    for built in result.models:
        for outcome in built.steps:
            table.add_row(
                built.plan.name,
                str(built.plan.version),
                outcome.kind,
                outcome.status,
                outcome.reason,
                f"{outcome.seconds:.2f}",
            )
    print_table(table)
    app().out.print(
        f"wrote {output} ({len(manifest.files)} files, manifest {manifest.digest[:16]})"
    )
    app().detail("toolchain: " + ", ".join(f"{k} {v}" for k, v in sorted(result.toolchain.items())))


@main.command("schema")
def schema_command() -> None:
    """Print the recipe JSON Schema (every key, its type and meaning; editors validate recipes with
    it)."""
    sys.stdout.buffer.write(api.recipe_schema())


@main.command("adopt")
@click.argument("repository", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option(
    "-o",
    "--out",
    "out",
    type=click.Path(path_type=Path),
    required=True,
    help="Where the recipes go (one YAML per model, its files beside it, goldens/ after "
    "recording).",
)
@click.option(
    "--no-record",
    is_flag=True,
    help="Write the recipes only (record goldens later: build, then 'verify OUT --record').",
)
@json_option
def adopt_command(repository: Path, out: Path, no_record: bool, as_json: bool) -> None:
    """Turn an existing (hand-written) REPOSITORY into recipes that build the same configs, and
    record goldens from its models, so it can be built, verified, published and rolled back like a
    built one."""
    with _progress(not as_json) as progress:
        result = api.adopt(repository, out, record=not no_record, progress=progress)
    if as_json:
        _json(result)
    else:
        for item in result.recipes:
            recorded = (result.goldens or {}).get(item["name"])
            how = (result.recorded_by or {}).get(item["name"], "")
            tail = (
                ""
                if result.goldens is None
                else f"; goldens recorded ({how})"
                if recorded
                else f"; goldens {how if how.startswith('not recorded') else 'NOT recorded'}"
            )
            app().out.print(f"{item['name']} v{item['version']}: {item['recipe']}{tail}")
            for note in item.get("notes", []):
                app().out.print(f"  note: {note}")
        engines = "".join(
            f" --engine {item['name']}={item['engine']}"
            for item in result.recipes
            if item.get("engine")
        )
        app().out.print(f"next: tritonbuild build {out} -o OUT{engines} && tritonbuild verify OUT")
    if result.goldens is not None and not result.passed:
        raise VerifyError(
            "goldens were not recorded for every model (see the rows above)",
            hint=f"tritonbuild build {out} -o OUT && tritonbuild verify OUT --record shows why",
        )
