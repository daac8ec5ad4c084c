"""Recipes to a repository: validate, plan, build (load → plan → build → assemble), the CI matrix,
the recipe schema and the Model Analyzer export of the recipes' tune spaces."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.api.guards import planned_inputs, recipe_inputs, warn_missing_goldens
from tritonbuild.api.options import Progress
from tritonbuild.backends import REGISTRY
from tritonbuild.core import cachedir
from tritonbuild.core.cas import Store
from tritonbuild.core.remote import RemoteCache
from tritonbuild.plan import Plan, make_plan
from tritonbuild.plan.changes import models_changed_since
from tritonbuild.plan.matrix import MatrixEntry, matrix_entries
from tritonbuild.recipe import load_recipes
from tritonbuild.recipe.load import LoadedRecipe, expand_paths
from tritonbuild.recipe.schema import recipe_schema_bytes
from tritonbuild.repository.assemble import assemble, check_out_dir, check_out_overlap
from tritonbuild.repository.manifest import Manifest
from tritonbuild.server.target import EMBEDDED, ServingTarget, syntax_python
from tritonbuild.steps import BuildResult, build
from tritonbuild.tune.analyzer import ProfileExport, write_profile_config


def _load(paths: list[Path]) -> list[LoadedRecipe]:
    """The recipes, validated as the registered kinds (a path that does not exist is a usage error
    before the backends are imported)."""
    return load_recipes(expand_paths(paths), REGISTRY.recipe_kinds())


def validate(
    paths: list[Path], *, cache_dir: Path | None = None, serving: ServingTarget = EMBEDDED
) -> list[LoadedRecipe]:
    """Every check build runs before building (the recipes, then their plan: source files, Python
    syntax at the target image's Python), without building anything. cache_dir: as build's;
    serving: the image served by (its Python checks the Python files' syntax)."""
    loaded = _load(paths)
    make_plan(loaded, cachedir.resolve(cache_dir), syntax_python(serving))
    return loaded


def plan(paths: list[Path], *, cache_dir: Path | None = None) -> Plan:
    """cache_dir: where input digests are cached and remote checkpoints downloaded (default: the
    environment's)."""
    return make_plan(_load(paths), cachedir.resolve(cache_dir))


def build_repository(
    paths: list[Path],
    out: Path,
    *,
    force: bool = False,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    engines: dict[str, Path] | None = None,
    strict: bool = False,
    cache_url: str | None = None,
    changed_since: str | None = None,
    serving: ServingTarget = EMBEDDED,
) -> tuple[BuildResult, Manifest]:
    """The recipes at paths built into the repository out (replaced whole), through the cache;
    (what each step did, the manifest written).

    force: replace out even if it is not a tritonbuild repository (never one overlapping an
    input). cache_dir: where steps, input digests and downloaded checkpoints are cached (default:
    the environment's). progress: progress lines. engines: prebuilt engine directories by model,
    assembled instead of built. strict: a step that cannot run here is an error instead of a skip.
    cache_url: a shared remote cache. changed_since: only the recipes whose inputs changed since
    this git revision. serving: the image the repository is served by (--triton-image): Python
    files' syntax is checked by that image's Python where this machine has it
    (server/target.py)."""
    cache_dir = cachedir.resolve(cache_dir)
    loaded = _load(paths)
    check_out_overlap(out, *recipe_inputs(loaded, cache_dir))  # refuse before any work
    check_out_dir(out, force)
    if progress:
        progress(f"planning {len(loaded)} recipe(s): hashing their inputs")
    the_plan = make_plan(loaded, cache_dir, syntax_python(serving))
    check_out_overlap(out, planned_inputs(the_plan))
    only = None
    if changed_since:
        only = models_changed_since(the_plan, changed_since, Path.cwd())
    store = Store(cache_dir)
    # NOTE: 'cache gc' waits until the blobs are recorded and materialised
    with store.lock(shared=True):
        result = build(
            the_plan,
            store,
            progress,
            engines=engines,
            strict=strict,
            cache_url=cache_url,
            only=only,
        )
        result = warn_missing_goldens(result, out)
        if progress:
            progress(f"assembling {out} from the cache")
        return result, assemble(result, out, force=force)


def build_matrix(
    paths: list[Path],
    *,
    cache_dir: Path | None = None,
    cache_url: str | None = None,
    changed_since: str | None = None,
) -> list[MatrixEntry]:
    """One entry per recipe that has a step missing from the local (and remote) cache: what CI fans
    out. cache_dir: the local cache (default: the environment's); cache_url: the shared remote
    cache; changed_since: only recipes whose inputs changed since this git revision."""
    cache_dir = cachedir.resolve(cache_dir)
    the_plan = plan(paths, cache_dir=cache_dir)
    store = Store(cache_dir)
    remote = RemoteCache(cache_url, lambda _msg: None) if cache_url else None
    only = models_changed_since(the_plan, changed_since, Path.cwd()) if changed_since else None

    def cached(key: str) -> bool:
        return store.get_record(key) is not None or bool(remote and remote.exists(key))

    return matrix_entries(the_plan, cached, only)


def recipe_schema() -> bytes:
    return recipe_schema_bytes(REGISTRY.recipe_kinds())


def export_model_analyzer(
    paths: list[Path],
    out: Path,
    *,
    model_repository: str,
    input_data: dict[str, str] | str | None = None,
) -> ProfileExport:
    """The recipes' tune spaces as a Model Analyzer profile config at OUT (tune/analyzer.py).
    model_repository: the repository Model Analyzer profiles, as its tritonserver sees it;
    input_data: perf_analyzer data per model (model → file), or one file for a single recipe."""
    return write_profile_config(
        [loaded.recipe for loaded in _load(paths)],
        out,
        model_repository=model_repository,
        input_data=input_data,
    )
