"""The only place that chains stages: load → plan → build → assemble → verify. The CLI calls only
this."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tritonbuild.api.guards import planned_inputs, recipe_inputs, warn_missing_goldens
from tritonbuild.backends import REGISTRY
from tritonbuild.core import cachedir
from tritonbuild.core.cas import Store
from tritonbuild.core.location import Location
from tritonbuild.errors import VerifyError
from tritonbuild.plan import Plan, make_plan
from tritonbuild.recipe import load_recipes
from tritonbuild.recipe.load import LoadedRecipe, expand_paths
from tritonbuild.repository.assemble import assemble, check_out_dir, check_out_overlap
from tritonbuild.repository.manifest import MANIFEST_NAME, Manifest, read_repository
from tritonbuild.server.target import syntax_python
from tritonbuild.steps import BuildResult, build
from tritonbuild.verify.models import VerificationReport

if TYPE_CHECKING:
    from tritonbuild.api.serving import Serving
    from tritonbuild.plan.matrix import MatrixEntry
    from tritonbuild.publish.inspect import TargetCheck, TargetListing
    from tritonbuild.publish.rollback import RollbackResult
    from tritonbuild.repository.adopt import AdoptResult
    from tritonbuild.server.status import ServerStatus
    from tritonbuild.tune.analyzer import ProfileExport
    from tritonbuild.verify.infer import InferResult
    from tritonbuild.verify.interop import PerfDataExport

Progress = Callable[[str], None]


def _load(paths: list[Path]) -> list[LoadedRecipe]:
    """The recipes, validated as the registered kinds (a path that does not exist is a usage error
    before the backends are imported)."""
    return load_recipes(expand_paths(paths), REGISTRY.recipe_kinds())


def validate(
    paths: list[Path], *, cache_dir: Path | None = None, triton_image: str | None = None
) -> list[LoadedRecipe]:
    """Every check build runs before building (the recipes, then their plan: source files, Python
    syntax at the target image's Python), without building anything."""
    loaded = _load(paths)
    make_plan(loaded, cachedir.resolve(cache_dir), syntax_python(triton_image))
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
    triton_image: str | None = None,
) -> tuple[BuildResult, Manifest]:
    """triton_image: the image the repository is served by (--triton-image): Python files' syntax
    is checked by that image's Python where this machine has it (server/target.py)."""
    cache_dir = cachedir.resolve(cache_dir)
    loaded = _load(paths)
    check_out_overlap(out, *recipe_inputs(loaded, cache_dir))  # refuse before any work
    check_out_dir(out, force)
    if progress:
        progress(f"planning {len(loaded)} recipe(s): hashing their inputs")
    the_plan = make_plan(loaded, cache_dir, syntax_python(triton_image))
    check_out_overlap(out, planned_inputs(the_plan))
    only = None
    if changed_since:
        from tritonbuild.plan.changes import models_changed_since

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


def verify_repository(
    root: Path,
    *,
    server_url: str | None = None,
    server_log: Path | None = None,
    record: bool = False,
    progress: Progress | None = None,
    force: bool = False,
    rebuild: bool = False,
    load_timeout: float | None = None,
    tritonserver: str | None = None,
    backends: dict | None = None,
    triton_image: str | None = None,
) -> VerificationReport:
    """tritonserver: a local binary instead of the embedded one; backends: as serve's (their models
    run live); triton_image: the image the repository is served by (its Python runs the embedded
    server's Python side)."""
    from tritonbuild.verify.run import verify

    report = verify(
        root,
        server_url=server_url,
        server_log=server_log,
        record=record,
        progress=progress,
        force=force,
        tritonserver=tritonserver,
        backends=backends,
        triton_image=triton_image,
        **({"load_timeout": load_timeout} if load_timeout else {}),
    )
    if rebuild and report.manifest_digest:
        report = rebuild_and_compare(root, report, progress)
    return report


def rebuild_and_compare(
    root: Path, report: VerificationReport, progress: Progress | None = None
) -> VerificationReport:
    """verify --rebuild: build OUT's recipes again into a scratch OUT with an empty, isolated cache
    and compare every artefact's sha256 with OUT's (the recipes' paths are relative to where the
    build ran)."""
    from tritonbuild.repository.manifest import read_manifest
    from tritonbuild.verify import reproduce
    from tritonbuild.verify.run import with_reproducibility

    manifest = read_manifest(root)
    recipes = reproduce.recipes_of(manifest)
    with tempfile.TemporaryDirectory(prefix="tritonbuild-rebuild-") as tmp:
        if progress:
            progress(f"rebuilding {len(recipes)} recipe(s) in an isolated cache")
        _, rebuilt = build_repository(
            recipes, Path(tmp) / "out", cache_dir=Path(tmp) / "cache", progress=progress
        )
    return with_reproducibility(root, report, reproduce.compare(manifest, rebuilt))


def tune(
    root: Path,
    model: str,
    *,
    report_dir: Path,
    sla_ms: float | None = None,
    min_vs_default: float | None = None,
    concurrency: list[int] | None = None,
    apply: bool = False,
    confidence: float | None = None,
    rounds: int | None = None,
    baseline: str | None = None,
    **options,
) -> dict:
    """Measure serving configs of one built model; optionally write the winner into its recipe."""
    from tritonbuild.tune.built import recipe_for, with_flags
    from tritonbuild.tune.run import tune as _tune

    rpath, spec = recipe_for(Path(root), model, options.get("recipe_path"))
    spec = with_flags(
        spec,
        sla_p99_ms=sla_ms,
        min_vs_default=min_vs_default,
        concurrency=concurrency,
        confidence=confidence,
        rounds=rounds,
        baseline=baseline,
    )
    report = _tune(Path(root), model, report_dir=report_dir, tune_override=spec, **options)
    report["report_dir"] = str(report_dir)
    if apply and report.get("winner"):
        from tritonbuild.tune.patch import apply_patch

        apply_patch(rpath, report["winner"]["recipe_values"])
        report["applied_to"] = str(rpath)
    return report


def serve(
    repository: str | Path,
    *,
    endpoint_url: str | None = None,
    tritonserver: str | None = None,
    triton_image: str | None = None,
    **server_options,
) -> Serving:
    """The embedded server (not yet started) for a directory or a target URL, the models it can
    load, the models it cannot. server_options: EmbeddedServer's (control, ports, log_path,
    log_verbose, poll_secs); tritonserver: a local binary to run instead of the embedded one;
    triton_image: the image served by (server/target.py; else the one a directory's recipes
    name)."""
    from tritonbuild.api.serving import serving

    return serving(
        repository,
        endpoint_url=endpoint_url,
        tritonserver=tritonserver,
        triton_image=triton_image,
        **server_options,
    )


def publish(root: Path, target: Location | str, *, reverify: bool = False, **options):
    """reverify: run verify (goldens bit for bit) again right before publishing, instead of trusting
    the report on disk; the fresh report is the one the gate reads. A repository without our
    manifest (hand-written) is verified as Triton would judge it and published through a manifest
    made from what is there."""
    from tritonbuild.errors import PublishError, UsageError
    from tritonbuild.publish.protocol import publish as _publish

    if Path(root).is_dir() and not (Path(root) / MANIFEST_NAME).exists():
        from tritonbuild.api.existing import publish_existing

        return publish_existing(Path(root), target, **options)
    if reverify:
        if options.get("skip_verify"):
            raise UsageError(
                "--reverify and --skip-verify contradict each other", hint="pass one of them"
            )
        # NOTE: with --require-reproducible the fresh report carries a fresh rebuild check too
        report = verify_repository(
            Path(root),
            progress=options.get("progress"),
            rebuild=bool(options.get("require_reproducible")),
        )
        if not report.passed:
            raise PublishError(
                "--reverify: the repository fails verification now, whatever its report said",
                where=str(root),
                hint=f"see 'tritonbuild verify {root}'; fix, rebuild, publish",
            )
    options.pop("progress", None)
    return _publish(root, target, **options)


def list_target(target: Location | str, *, endpoint_url: str | None = None) -> TargetListing:
    from tritonbuild.publish.inspect import list_target as _ls

    return _ls(target, endpoint_url=endpoint_url)


def rollback(target: Location | str, model: str, to: int, **options) -> RollbackResult:
    from tritonbuild.publish.rollback import rollback as _rollback

    return _rollback(target, model, to, **options)


def verify_target(target: Location | str, *, endpoint_url: str | None = None) -> TargetCheck:
    from tritonbuild.publish.inspect import verify_target as _verify

    return _verify(target, endpoint_url=endpoint_url)


def build_matrix(
    paths: list[Path],
    *,
    cache_dir: Path | None = None,
    cache_url: str | None = None,
    changed_since: str | None = None,
) -> list[MatrixEntry]:
    """One entry per recipe that has a step missing from the local (and remote) cache: what CI fans
    out."""
    from tritonbuild.core.remote import RemoteCache
    from tritonbuild.plan.changes import models_changed_since
    from tritonbuild.plan.matrix import matrix_entries

    cache_dir = cachedir.resolve(cache_dir)
    the_plan = plan(paths, cache_dir=cache_dir)
    store = Store(cache_dir)
    remote = RemoteCache(cache_url, lambda _msg: None) if cache_url else None
    only = models_changed_since(the_plan, changed_since, Path.cwd()) if changed_since else None

    def cached(key: str) -> bool:
        return store.get_record(key) is not None or bool(remote and remote.exists(key))

    return matrix_entries(the_plan, cached, only)


def deploy_snippets(
    repository: Path, out: Path, **options
) -> tuple[Path, int, list[str], tuple[str, ...], list[str]]:
    """Kubernetes YAML for a built repository: (path, startup budget s, models the probe has no
    golden of, what the models import that the image must add: OUT/requirements-models.txt, what
    the operator must know: the ConfigMap's lifecycle, the store's endpoint, drains, root, GPUs)."""
    from tritonbuild.publish.k8s import write

    return write(Path(repository), read_repository(repository, VerifyError), out, **options)


def recipe_schema() -> bytes:
    from tritonbuild.recipe.schema import recipe_schema_bytes

    return recipe_schema_bytes(REGISTRY.recipe_kinds())


def infer(
    target: str,
    model: str,
    *,
    inputs: dict[str, Path] | None = None,
    goldens_from: Path | None = None,
    data: str | None = None,
    tritonserver: str | None = None,
) -> InferResult:
    """Send MODEL its goldens (or the given .npy inputs) on a server URL, or on a built directory
    served by the embedded tritonserver for the call; outputs come back with a bit-exact comparison
    against the goldens."""
    from tritonbuild.verify.infer import infer as _infer

    return _infer(
        target,
        model,
        inputs=inputs,
        goldens_from=goldens_from,
        data=data,
        tritonserver=tritonserver,
    )


def status(url: str, metrics_url: str | None = None) -> ServerStatus:
    """A running tritonserver: health, version, models (state, versions, config), inference
    counters."""
    from tritonbuild.server.status import server_status

    return server_status(url, metrics_url)


def adopt(
    root: Path, out: Path, *, record: bool = True, progress: Progress | None = None
) -> AdoptResult:
    """An existing repository → recipes in out (repository/adopt.py); record: build them in a
    scratch OUT and record goldens from the models (verify --record), so the next build verifies bit
    for bit."""
    from tritonbuild.repository.adopt import AdoptResult
    from tritonbuild.repository.adopt import adopt as _adopt

    adopted = _adopt(Path(root), Path(out))  # made here if missing
    loaded = _load(
        [a.recipe for a in adopted]
    )  # the recipe rules, now: a refusal names the file and key
    engines = {
        a.name: a.engine for a in adopted if a.engine is not None
    }  # copied by adopt: build --engine
    result = AdoptResult(recipes=[a.row() for a in adopted])
    if record:
        with tempfile.TemporaryDirectory(prefix="tritonbuild-adopt-") as tmp:
            build_repository(
                [a.recipe for a in adopted], Path(tmp) / "out", progress=progress, engines=engines
            )
            report = verify_repository(Path(tmp) / "out", record=True, progress=progress)
        result.goldens = {each.name: each.passed for each in report.models}
        result.recorded_by = {each.name: each.ran_by() for each in report.models}
        unrun = {each.name for each in report.models if each.route == "none"}
        for each in (
            loaded
        ):  # a recipe whose models need a machine this is not: said in the backend's words
            if each.recipe.name in unrun and (needs := REGISTRY.get(each.recipe.backend).needs):
                result.recorded_by[each.recipe.name] = f"not recorded: needs {needs}"
        result.passed = all(each.passed for each in report.models if each.route != "none")
    return result


def export_perf_data(
    root: Path, model: str, out: Path, *, validation: bool = True
) -> PerfDataExport:
    """MODEL's goldens as perf_analyzer --input-data JSON at OUT (verify/interop.py)."""
    from tritonbuild.verify.interop import write_perf_data

    return write_perf_data(root, model, out, validation=validation)


def export_model_analyzer(paths: list[Path], out: Path, **options) -> ProfileExport:
    """The recipes' tune spaces as a Model Analyzer profile config at OUT (tune/analyzer.py)."""
    from tritonbuild.tune.analyzer import write_profile_config

    return write_profile_config([loaded.recipe for loaded in _load(paths)], out, **options)
