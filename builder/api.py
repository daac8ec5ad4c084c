"""The only place that chains stages: load → plan → build → assemble → verify. The CLI calls only this."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tritonbuild.backends import REGISTRY
from tritonbuild.core import cachedir
from tritonbuild.core.cas import Store
from tritonbuild.core.location import Location
from tritonbuild.core.stores import as_location, is_url
from tritonbuild.errors import VerifyError
from tritonbuild.plan import Plan, make_plan
from tritonbuild.recipe import load_recipes
from tritonbuild.recipe.load import LoadedRecipe, expand_paths
from tritonbuild.repository.assemble import assemble, check_out_dir, check_out_overlap
from tritonbuild.repository.manifest import MANIFEST_NAME, Manifest, read_repository, serving_needs
from tritonbuild.server.target import environment_summary as embedded_environment  # noqa: F401  (CLI's)
from tritonbuild.steps import BuildResult, build
from tritonbuild.verify.models import VerificationReport

if TYPE_CHECKING:
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
    """The recipes, validated as the registered kinds (a path that does not exist is a usage error before the
    backends are imported)."""
    return load_recipes(expand_paths(paths), REGISTRY.recipe_kinds())


def validate(paths: list[Path]) -> list[LoadedRecipe]:
    return _load(paths)


def plan(paths: list[Path], *, cache_dir: Path | None = None) -> Plan:
    """cache_dir: where input digests are cached and remote checkpoints downloaded (default: the environment's)."""
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
) -> tuple[BuildResult, Manifest]:
    cache_dir = cachedir.resolve(cache_dir)
    loaded = _load(paths)
    check_out_overlap(out, *_inputs_of(loaded, cache_dir))  # refuse before any work
    check_out_dir(out, force)
    if progress:
        progress(f"planning {len(loaded)} recipe(s): hashing their inputs")
    the_plan = make_plan(loaded, cache_dir)
    check_out_overlap(
        out,
        {
            Path(path): f"an input of model {model_plan.name!r}"
            for model_plan in the_plan.models
            for step in model_plan.steps
            for path in step.inputs
            if "://" not in path
        },
    )
    only = None
    if changed_since:
        from tritonbuild.plan.changes import models_changed_since

        only = models_changed_since(the_plan, changed_since, Path.cwd())
    store = Store(cache_dir)
    with store.lock(
        shared=True
    ):  # NOTE: 'cache gc' waits until the blobs are recorded and materialised
        result = build(
            the_plan,
            store,
            progress,
            engines=engines,
            strict=strict,
            cache_url=cache_url,
            only=only,
        )
        result = _warn_missing_goldens(result, out)
        if progress:
            progress(f"assembling {out} from the cache")
        return result, assemble(result, out, force=force)


def _warn_missing_goldens(result: BuildResult, out: Path) -> BuildResult:
    """A declared verify.goldens that does not exist yet: said at build, not discovered at verify."""
    missing = [
        f"{built.plan.name}: verify.goldens {built.plan.recipe.verify.goldens} does not exist (declared in "
        f"{built.plan.recipe_path}); record it with 'tritonbuild verify {out} --record' and commit it"
        for built in result.models
        if getattr(built.plan.recipe, "verify", None) is not None
        and built.plan.recipe.verify.goldens
        and not (Path(built.plan.recipe_dir) / built.plan.recipe.verify.goldens).is_file()
    ]
    return (
        result.model_copy(update={"warnings": [*result.warnings, *missing]}) if missing else result
    )


def _inputs_of(loaded: list[LoadedRecipe], cache: Path) -> tuple[dict[Path, str], dict[Path, str]]:
    """What an OUT must not replace: (paths it must not be or hold, trees it must not overlap either way)."""
    held: dict[Path, str] = {}
    around: dict[Path, str] = {cache: "the build cache"}
    for loaded_recipe in loaded:
        held[loaded_recipe.path] = "the recipe"
        held[loaded_recipe.base_dir] = "the recipe directory"
        goldens = getattr(getattr(loaded_recipe.recipe, "verify", None), "goldens", None)
        if goldens:
            held[loaded_recipe.base_dir / goldens] = f"the goldens of {loaded_recipe.recipe.name!r}"
        source = getattr(loaded_recipe.recipe, "source", None)
        for rel in ([source.path] if getattr(source, "path", None) else []) + list(
            getattr(source, "files", [])
        ):
            if "://" not in rel:
                held[loaded_recipe.base_dir / rel] = f"a source of {loaded_recipe.recipe.name!r}"
        for key in ("checkpoint", "tokenizer"):
            value = getattr(loaded_recipe.recipe, key, None)
            rel = getattr(value, "path", value)
            if isinstance(rel, str) and "://" not in rel:
                around[loaded_recipe.base_dir / rel] = f"the {key} of {loaded_recipe.recipe.name!r}"
    return held, around


def verify_repository(
    root: Path,
    *,
    server_url: str | None = None,
    record: bool = False,
    progress: Progress | None = None,
    force: bool = False,
    rebuild: bool = False,
    load_timeout: float | None = None,
    tritonserver: str | None = None,
    backends: dict | None = None,
    triton_image: str | None = None,
) -> VerificationReport:
    """tritonserver: a local binary instead of the embedded one; backends: as serve's (their models run live);
    triton_image: the image the repository is served by (its Python runs the embedded server's Python side)."""
    from tritonbuild.verify.run import verify

    report = verify(
        root,
        server_url=server_url,
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
    """verify --rebuild: build OUT's recipes again into a scratch OUT with an empty, isolated cache and compare
    every artefact's sha256 with OUT's (the recipes' paths are relative to where the build ran)."""
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
):
    """(EmbeddedServer not yet started, models it can load, models it cannot) for a directory or a target URL.
    server_options: EmbeddedServer's (control, ports, log_path, log_verbose, poll_secs); tritonserver: a local
    binary to run instead of the embedded one; triton_image: the image served by (server/target.py; else
    the one a directory's recipes name)."""
    from tritonbuild.server.launcher import launcher_for
    from tritonbuild.server.target import target_for

    ours = not is_url(str(repository)) and (Path(repository) / MANIFEST_NAME).is_file()
    target = target_for(
        triton_image, read_repository(Path(repository), VerifyError) if ours else None
    )
    return _serve(
        repository,
        endpoint_url=endpoint_url,
        launcher=launcher_for(tritonserver, target),
        **server_options,
    )


def _serve(repository: str | Path, *, endpoint_url: str | None = None, **server_options):
    from tritonbuild.backends import runs_embedded
    from tritonbuild.server.embedded import EmbeddedServer

    if is_url(str(repository)):
        from tritonbuild.publish.inspect import list_opened
        from tritonbuild.publish.objects import read_text
        from tritonbuild.publish.protocol import open_for_read
        from tritonbuild.triton.config import parse

        where = as_location(str(repository), endpoint_url)
        target = open_for_read(where)
        info = list_opened(target)
        names, loadable = [], []
        for entry in info.models:
            config = read_text(target, target.path(entry.name, "config.pbtxt"))
            model_config = parse(config) if config is not None else None
            # published: config.pbtxt pins the live version; a plain directory (nothing published there):
            # Triton loads by the config's own version_policy, so a config that pins nothing is loadable
            plain = (
                bool(entry.present)
                and not entry.complete
                and model_config is not None
                and not model_config.version_policy.HasField("specific")
            )
            if model_config is None or not (entry.live is not None or plain):
                continue
            names.append(entry.name)
            if runs_embedded(model_config.backend):
                loadable.append(entry.name)
        return (
            EmbeddedServer(target.triton_url(), **server_options),
            loadable,
            sorted(set(names) - set(loadable)),
        )
    root = Path(repository)
    if not (
        root / MANIFEST_NAME
    ).exists():  # hand-written: what Triton would load, by each model's config
        from tritonbuild.core.toolchain import fingerprint
        from tritonbuild.verify.run import model_dirs, runs_as_written

        names = model_dirs(root)
        if not names:
            raise VerifyError(
                f"{root} is not a tritonbuild repository (no {MANIFEST_NAME}) and holds no model "
                "directory to serve",
                where=str(root),
                hint="build one with 'tritonbuild build "
                "RECIPES -o DIR', or pass a Triton model repository (one directory per model)",
            )
        gpu = bool(fingerprint().get("gpu_name"))
        loadable = [name for name in names if runs_as_written(root / name, gpu)]
        return EmbeddedServer(root, **server_options), loadable, sorted(set(names) - set(loadable))
    manifest = read_repository(root, VerifyError)
    names = sorted({model.name for model in manifest.models})
    extra = set(server_options.get("backends") or {})  # serve --backend: its models are loaded too
    loadable = sorted(
        {
            model.name
            for model in manifest.models
            if (runs_embedded(model.backend) and model.target == "cpu") or model.backend in extra
        }
    )
    env, wheels = serving_needs(
        root, [model for model in manifest.models if model.name in loadable]
    )
    options = {
        **server_options,
        "env": {**env, **(server_options.get("env") or {})},
        "wheels": [*wheels, *(server_options.get("wheels") or [])],
    }
    return EmbeddedServer(root, **options), loadable, sorted(set(names) - set(loadable))


def publish(root: Path, target: Location | str, *, reverify: bool = False, **options):
    """reverify: run verify (goldens bit for bit) again right before publishing, instead of trusting the
    report on disk; the fresh report is the one the gate reads. A repository without our manifest (hand-written)
    is verified as Triton would judge it and published through a manifest made from what is there."""
    from tritonbuild.errors import PublishError, UsageError
    from tritonbuild.publish.protocol import publish as _publish

    if Path(root).is_dir() and not (Path(root) / MANIFEST_NAME).exists():
        return _publish_existing(Path(root), target, **options)
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


def _publish_existing(root: Path, target: Location | str, **options):
    """Verify (Triton's rules, Triton's core, hand-written Python models loaded) unless skip_verify, then publish a
    linked copy holding a manifest made from the files and the report for it: nothing is written into root."""
    import shutil

    from tritonbuild.backends import REGISTRY
    from tritonbuild.core.fsutil import write_atomic
    from tritonbuild.core.hashing import pretty_json
    from tritonbuild.errors import PublishError
    from tritonbuild.publish.protocol import publish as _publish
    from tritonbuild.repository.assemble import write_manifest
    from tritonbuild.repository.existing import existing_models, file_entries
    from tritonbuild.repository.manifest import NOT_IN_MANIFEST, REPORT_NAME
    from tritonbuild.verify.run import lint, model_dirs

    if not model_dirs(root):
        raise PublishError(
            f"{root} is not a tritonbuild repository (no {MANIFEST_NAME}) and holds no model "
            "directory",
            where=str(root),
            hint="build one with 'tritonbuild build RECIPES -o DIR', "
            "or pass a Triton model repository (one directory per model)",
        )
    progress = options.pop("progress", None)
    report = None if options.get("skip_verify") else lint(root, progress=progress)
    if report is not None and not report.passed:
        first = next(check for check in report.static if not check.ok)
        raise PublishError(
            f"{root} fails verification as Triton would judge it: {first.model}: {first.check}: "
            f"{first.detail}",
            where=str(root),
            hint=f"'tritonbuild verify {root}' shows every finding",
        )
    staging = Path(tempfile.mkdtemp(prefix="tritonbuild-publish-"))
    try:
        copy = staging / "repository"
        shutil.copytree(
            root,
            copy,
            copy_function=_link_or_copy,
            ignore=shutil.ignore_patterns("__pycache__", *NOT_IN_MANIFEST),
        )
        files = file_entries(copy)
        manifest = write_manifest(
            copy, REGISTRY.toolchain(), existing_models(copy, files, PublishError), known=files
        )
        if report is not None:
            report = report.model_copy(
                update={"manifest_digest": manifest.digest, "signature": None}
            ).signed()
            write_atomic(copy / REPORT_NAME, pretty_json(report.model_dump(mode="json")))
        return _publish(copy, target, **options)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _link_or_copy(src: str, dest: str) -> str:
    """A hard link where the filesystem allows (publishing only reads), else a copy."""
    import os
    import shutil

    try:
        os.link(src, dest)
        return dest
    except OSError:
        return shutil.copy2(src, dest)


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
    """One entry per recipe that has a step missing from the local (and remote) cache: what CI fans out."""
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


def cache_store(cache_dir: Path | None = None) -> Store:
    return Store(cachedir.resolve(cache_dir))


def deploy_snippets(repository: Path, out: Path, **options) -> tuple[Path, int, list[str]]:
    """Kubernetes YAML for a built repository: (path, startup budget s, models the probe has no golden of)."""
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
    """Send MODEL its goldens (or the given .npy inputs) on a server URL, or on a built directory served by the
    embedded tritonserver for the call; outputs come back with a bit-exact comparison against the goldens."""
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
    """A running tritonserver: health, version, models (state, versions, config), inference counters."""
    from tritonbuild.server.status import server_status

    return server_status(url, metrics_url)


def adopt(
    root: Path, out: Path, *, record: bool = True, progress: Progress | None = None
) -> AdoptResult:
    """An existing repository → recipes in out (repository/adopt.py); record: build them in a scratch OUT and
    record goldens from the models (verify --record), so the next build verifies bit for bit."""
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
