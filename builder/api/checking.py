"""A built repository checked: verify (static checks, live loads, goldens bit for bit; a rebuild
compared), adopt (recipes from a hand-written repository, goldens recorded), infer on a server or a
directory, a running server's status, a model's goldens as perf_analyzer data."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from tritonbuild.api.building import _load, build_repository
from tritonbuild.api.options import Progress
from tritonbuild.api.serving import serve
from tritonbuild.backends import REGISTRY
from tritonbuild.core.stores import is_url
from tritonbuild.errors import InferenceError, UsageError
from tritonbuild.publish.layout import side_places
from tritonbuild.publish.models import TARGET_MANIFEST, TargetManifest
from tritonbuild.publish.objects import local_target_url
from tritonbuild.repository.adopt import AdoptResult
from tritonbuild.repository.adopt import adopt as _adopt
from tritonbuild.repository.assemble import golden_name
from tritonbuild.repository.manifest import read_manifest
from tritonbuild.server.loading import LOAD_TIMEOUT_S
from tritonbuild.server.status import ServerStatus, server_status
from tritonbuild.server.target import EMBEDDED, ServingTarget
from tritonbuild.verify import reproduce
from tritonbuild.verify.infer import InferResult
from tritonbuild.verify.infer import infer as _infer
from tritonbuild.verify.interop import PerfDataExport, write_perf_data
from tritonbuild.verify.models import VerificationReport
from tritonbuild.verify.run import verify, with_reproducibility


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
    serving: ServingTarget = EMBEDDED,
    backends: dict[str, Path] | None = None,
) -> VerificationReport:
    """The repository at root checked: static checks, each model loaded and its goldens compared
    bit for bit (a hand-written repository: Triton's rules and Triton's core); the report, also
    written beside the manifest.

    server_url: verify live against this tritonserver instead of the embedded one; server_log:
    that server's log (what its runtimes chose). record: record the goldens (force: replacing
    committed ones that differ). progress: progress lines. rebuild: also rebuild the recipes in an
    isolated cache and compare every artefact's sha256. load_timeout: seconds a model may take to
    load in the embedded server (None: the default). serving: the tritonserver that runs (else
    the embedded one) and the image the repository is served by (its Python runs the embedded
    server's Python side; else the recipes' image). backends: Python-based backends served beside
    the python backend (name → directory), their models verified live, as serve runs them."""
    report = verify(
        root,
        server_url=server_url,
        server_log=server_log,
        record=record,
        progress=progress,
        force=force,
        serving=serving,
        backends=backends,
        load_timeout=load_timeout or LOAD_TIMEOUT_S,
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
    manifest = read_manifest(root)
    recipes = reproduce.recipes_of(manifest)
    with tempfile.TemporaryDirectory(prefix="tritonbuild-rebuild-") as tmp:
        if progress:
            progress(f"rebuilding {len(recipes)} recipe(s) in an isolated cache")
        _, rebuilt = build_repository(
            recipes, Path(tmp) / "out", cache_dir=Path(tmp) / "cache", progress=progress
        )
    return with_reproducibility(root, report, reproduce.compare(manifest, rebuilt))


def adopt(
    root: Path, out: Path, *, record: bool = True, progress: Progress | None = None
) -> AdoptResult:
    """An existing repository → recipes in out (repository/adopt.py); record: build them in a
    scratch OUT and record goldens from the models (verify --record), so the next build verifies bit
    for bit; progress: progress lines."""
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


def infer(
    target: str,
    model: str,
    *,
    inputs: dict[str, Path] | None = None,
    goldens_from: Path | None = None,
    data: str | None = None,
    serving: ServingTarget = EMBEDDED,
) -> InferResult:
    """Send MODEL its goldens (or the given .npy inputs) on a server URL, or on a built directory
    served by the embedded tritonserver for the call; outputs come back with a bit-exact comparison
    against the goldens. inputs: .npy files by input name; goldens_from: the built repository
    whose goldens a server URL gets; data: 'random' (seeded) or 'zeros', one request of the shapes
    the server declares; serving: the tritonserver that serves a directory (else the embedded
    one; with an image named, the embedded one's Python side runs that image's Python). A
    directory holding a publish target (a synced copy), as target or as goldens_from: its live
    version is served and sent the goldens published with it."""
    if goldens_from is not None and local_target_url(goldens_from) is not None:
        recorded = _live_goldens(Path(goldens_from), model)
        return _infer(target, model, inputs=inputs, data=data, serving=serving, recorded=recorded)
    url = None if is_url(target) else local_target_url(target)
    if url is not None:
        return _infer_published(Path(target), url, model, inputs, data, serving)
    return _infer(
        target, model, inputs=inputs, goldens_from=goldens_from, data=data, serving=serving
    )


def _infer_published(
    folder: Path, url: str, model: str, inputs, data: str | None, serving: ServingTarget
) -> InferResult:
    """infer on a directory holding a publish target: the model's live version served the way
    `serve` serves the target (its portable numerics set), sent the goldens published with it."""
    served = serve(url, serving=serving)
    if model not in served.loadable:
        why = (
            "its backend is not in the embedded server"
            if model in served.not_loadable
            else ("no live version of it there")
        )
        raise InferenceError(
            f"{folder} cannot serve {model!r} here: {why}",
            where=str(folder),
            hint=f"models it serves: {', '.join(served.loadable) or '-'}",
        )
    recorded = None if inputs or data else _live_goldens(folder, model)
    served = dataclasses.replace(served, loadable=[model])  # an ensemble's steps load with it
    try:
        ready = served.start()
        return _infer(ready.http, model, inputs=inputs, data=data, recorded=recorded)
    finally:
        served.server.cleanup()


def _live_goldens(folder: Path, model: str) -> Path:
    """The goldens published with the model's live version in a directory holding a publish target
    (inside its version folder, or beside it where an earlier tritonbuild put them)."""
    state = TargetManifest.model_validate_json((folder / TARGET_MANIFEST).read_bytes())
    published = state.models.get(model)
    live = published.live if published is not None else None
    for rel in side_places(live, golden_name(live)) if live is not None else ():
        if (folder / model / rel).is_file():
            return folder / model / rel
    raise UsageError(
        f"{model} has no goldens published in {folder}"
        + ("" if live is not None else " (no live version of it there)"),
        hint="pass --input NAME=FILE.npy or --data random",
    )


def status(url: str, metrics_url: str | None = None) -> ServerStatus:
    """A running tritonserver at url: health, version, models (state, versions, config), inference
    counters from metrics_url (default: url's host, port 8002)."""
    return server_status(url, metrics_url)


def export_perf_data(
    root: Path, model: str, out: Path, *, validation: bool = True
) -> PerfDataExport:
    """MODEL's goldens as perf_analyzer --input-data JSON at OUT (verify/interop.py); validation:
    with their recorded outputs as validation_data (perf_analyzer checks each answer)."""
    return write_perf_data(root, model, out, validation=validation)
