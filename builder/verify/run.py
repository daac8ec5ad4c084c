"""verify(): static checks, then each model live (embedded or given server) or in-process, goldens
bit for bit."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from tritonbuild.backends import REGISTRY
from tritonbuild.backends.base import Route
from tritonbuild.core.fsutil import remove_bytecode, write_atomic
from tritonbuild.core.hashing import pretty_json
from tritonbuild.errors import VerifyError
from tritonbuild.repository.assemble import write_manifest
from tritonbuild.repository.manifest import (
    MANIFEST_NAME,
    REPORT_NAME,
    Manifest,
    ManifestModel,
    read_repository,
    serving_needs,
)
from tritonbuild.server.embedded import EmbeddedServer
from tritonbuild.server.launcher import launcher_for, reported_python
from tritonbuild.server.loading import LOAD_TIMEOUT_S, ModelLoadError, load_log_cause, load_model
from tritonbuild.server.numerics import server_numerics
from tritonbuild.server.target import EMBEDDED, ServingTarget, python_side
from tritonbuild.triton.model_dir import ModelDirs
from tritonbuild.triton.standin import explain_load_error
from tritonbuild.verify.models import ModelReport, VerificationReport
from tritonbuild.verify.on_route import verify_model
from tritonbuild.verify.routes import route_for
from tritonbuild.verify.served import host_numerics, served_check
from tritonbuild.verify.static import core_checks, lint, static_checks
from tritonbuild.verify.triton_core import without_repeats

Progress = Callable[[str], None]


def verify(
    root: Path,
    *,
    server_url: str | None = None,
    record: bool = False,
    progress: Progress | None = None,
    force: bool = False,
    load_timeout: float = LOAD_TIMEOUT_S,
    serving: ServingTarget = EMBEDDED,
    backends: dict[str, Path] | None = None,
    server_log: Path | None = None,
) -> VerificationReport:
    """server_log: the log of the server at server_url (verify/served.py).
    serving: the tritonserver that runs (a local binary or 'docker:IMAGE' instead of the embedded
    server: launcher_for) and the image the repository is served by (--triton-image, else the
    recipes' serving image): the embedded server's Python side runs its Python, with what the
    repository's and the backends' Python files import here (server/target.py, server/mirror.py).
    backends: Python-based backends (name → directory with model.py, e.g. Triton's
    vLLM backend) the embedded server serves beside its python backend: their models are verified
    live there, with what their runtime needs from the server (the manifest's llm.serving:
    environment, plugin wheels), as serve runs them."""
    root = Path(root)
    if root.is_dir() and not (root / MANIFEST_NAME).exists() and not server_url and not record:
        return lint(root, progress=progress, serving=serving.checked())
    manifest = read_repository(root, VerifyError)
    # with --server its own Python runs: only an image given is reported
    serving = serving.for_repository(None if server_url else manifest).checked()
    given_server = python_side(None, None, serving.target, own=True) if server_url else None
    sources = (root, *(backends or {}).values())  # what the target's Python gets (server/mirror.py)

    def python_ran() -> dict:
        return given_server or reported_python(serving, sources)

    say = progress or (lambda _msg: None)
    say("static checks")
    models = ModelDirs(root)  # each model directory read once, for every check below
    routes, not_live = _routes(manifest, server_url, frozenset(backends or {}))
    core = functools.partial(core_checks, serving=serving, sources=sources)
    static = without_repeats(
        static_checks(root, manifest, models), core(root, not_live, say, models=models)
    )
    if not all(check.ok for check in static):
        return _report(root, manifest, static, [], python_ran(), passed=False)
    run = _ModelChecks(root, manifest, routes, server_url, record, force, say, server_log, models)
    with ExitStack() as stack:
        if any(route == "live-embedded" for route, _ in routes.values()):
            launcher = launcher_for(serving, sources)
            run.start_embedded(stack, launcher, backends, load_timeout)
        reports, updated = run.check_models()
    remove_bytecode(root)
    if record:
        manifest = write_manifest(root, manifest.toolchain, updated)
    passed = all(each.passed for each in reports)
    return _report(root, manifest, static, reports, python_ran(), passed=passed, recorded=record)


def _routes(manifest: Manifest, server_url: str | None, given: frozenset[str]) -> tuple[dict, list]:
    """Each model's route, and the names of those not run live (Triton's core checks them)."""
    routes = {
        (model.name, model.version): route_for(model, server_url, manifest, given=given)
        for model in manifest.models
    }
    not_live = sorted(
        {name for (name, _), (route, _) in routes.items() if route in ("in-process", "none")}
    )
    return routes, not_live


def _report(
    root: Path,
    manifest: Manifest,
    static: list,
    reports: list[ModelReport],
    python: dict,
    *,
    passed: bool,
    recorded: bool = False,
) -> VerificationReport:
    """The report, signed and written beside the manifest."""
    fields = {"models": reports, "recorded": recorded, "python_side": python, "passed": passed}
    toolchain = REGISTRY.toolchain()
    report = VerificationReport(
        manifest_digest=manifest.digest, toolchain=toolchain, static=static, **fields
    )
    return _write_report(root, report)


class _ModelChecks:
    """One verify run's models past the static checks: the embedded server started for those it
    runs live (and their loads), then each model checked on its route."""

    def __init__(
        self,
        root: Path,
        manifest: Manifest,
        routes: dict[tuple[str, int], tuple[Route, str]],
        server_url: str | None,
        record: bool,
        force: bool,
        say: Progress,
        server_log: Path | None = None,
        models: ModelDirs | None = None,
    ):
        self.root, self.manifest, self.routes = root, manifest, routes
        self.server_url, self.record, self.force, self.say = server_url, record, force, say
        self.server_log = server_log
        self.server: EmbeddedServer | None = None
        self.server_numerics: dict | None = None
        self.loads: dict[str, str | None] = {}
        self.models = models or ModelDirs(root)

    def _embedded_models(self) -> list[ManifestModel]:
        return [
            model
            for model in self.manifest.models
            if self.routes[(model.name, model.version)][0] == "live-embedded"
        ]

    def start_embedded(
        self, stack: ExitStack, launcher, backends: dict[str, Path] | None, load_timeout: float
    ) -> None:
        """Start the embedded server with what its models need, name it in their routes, load
        them."""
        self.say("starting the embedded tritonserver")
        env, wheels = serving_needs(self.root, self._embedded_models())
        server = EmbeddedServer(
            self.root, launcher=launcher, backends=backends, env=env, wheels=wheels
        )
        self.server = stack.enter_context(server)
        self.routes = {
            key: (
                route,
                server.describe() + detail.split(" embedded", 1)[-1]
                if route == "live-embedded"
                else detail,
            )
            for key, (route, detail) in self.routes.items()
        }
        self.say("loading models")
        reading = server_numerics(server)  # the stub's interpreter reads it while the models load
        self.loads = _load_all(server, self._embedded_models(), load_timeout)
        self.server_numerics = reading()

    def check_models(self) -> tuple[list[ModelReport], list[ManifestModel]]:
        """Each model's report, and the manifest's models (with goldens recorded, under record)."""
        reports, updated = [], []
        for model in self.manifest.models:
            self.say(f"{model.name} v{model.version}")
            route, detail = self.routes[(model.name, model.version)]
            if route == "live-server":
                url = self.server_url
            else:
                url = f"http://{self.server.http_url}" if self.server else None
            load_error = self.loads.get(model.name, "not loaded")
            model_report, updated_model = verify_model(
                self.root,
                model,
                route,
                detail,
                url,
                self.record,
                load_error,
                self.force,
                server_numerics=self.server_numerics
                if route == "live-embedded"
                else host_numerics(url, model),
                models=self.models,
            )
            if route == "in-process":
                note = (
                    f"not loaded in tritonserver: the embedded server has no {model.backend} "
                    "backend; pass --server URL"
                )
                model_report = model_report.model_copy(
                    update={"notes": [*model_report.notes, note]}
                )
            log = self.server.log_path if self.server and route == "live-embedded" else None
            reports.append(served_check(model, model_report, route, log or self.server_log))
            updated.append(updated_model)
        return reports, updated


def with_reproducibility(
    root: Path, report: VerificationReport, reproducibility
) -> VerificationReport:
    """The report with verify --rebuild's result; a file that differs fails it."""
    report = report.model_copy(
        update={
            "reproducibility": reproducibility,
            "passed": report.passed and reproducibility.reproducible,
            "signature": None,
        }
    )
    return _write_report(root, report)


def _write_report(root: Path, report: VerificationReport) -> VerificationReport:
    report = report.signed()
    write_atomic(root / REPORT_NAME, pretty_json(report.model_dump(mode="json")))
    return report


def _loads_dependencies(model: ManifestModel) -> bool:
    """Triton loads this model's depends_on with it (an ensemble's steps), as its backend
    declares."""
    backend = REGISTRY.for_manifest(model.backend)
    return backend is not None and backend.loads_dependencies


def _load_all(
    server: EmbeddedServer, models: list[ManifestModel], timeout: float = LOAD_TIMEOUT_S
) -> dict[str, str | None]:
    """Load models concurrently; name → Triton's load error or None. An ensemble's load loads its
    steps, and a second explicit load would reload them (the slow part: a Python stub importing
    torch), so an ensemble's steps are left to it; every other model (BLS included, whose calls
    Triton cannot see) is loaded itself."""
    from concurrent.futures import ThreadPoolExecutor

    by_ensemble = {
        step_name: model.name
        for model in models
        if _loads_dependencies(model)
        for step_name in model.depends_on
    }
    direct = [model.name for model in models if model.name not in by_ensemble]

    timed_out = {}

    def one(name: str) -> str | None:
        try:
            load_model(url, name, timeout=timeout)
            return None
        except ModelLoadError as e:
            if (
                e.timed_out
            ):  # a load that never answers: bounded, with what the server log says of it
                timed_out[name] = f"{e.message}; {load_log_cause(server.log_path, name)}"
            return e.message

    url = f"http://{server.http_url}"
    with ThreadPoolExecutor(max_workers=max(1, len(direct))) as pool:
        result = dict(zip(direct, pool.map(one, direct), strict=True))
    if any(result.values()):
        log = server.log_path.read_text(errors="replace")
        result = {
            n: (e and timed_out.get(n))
            or (e and f"tritonserver failed to load {n!r}: {explain_load_error(e, log, n)}")
            for n, e in result.items()
        }
    for step, ensemble in by_ensemble.items():
        result[step] = (
            None
            if result.get(ensemble) is None
            else f"not loaded: its ensemble {ensemble!r} failed to load: {result[ensemble]}"
        )
    return result
