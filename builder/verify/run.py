"""verify(): static checks, then each model live (embedded or given server) or in-process, goldens bit for bit."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from tritonbuild.backends import REGISTRY, runs_embedded
from tritonbuild.backends.base import Route
from tritonbuild.core.fsutil import write_atomic
from tritonbuild.core.hashing import pretty_json, sha256_file
from tritonbuild.core.secrets import redact
from tritonbuild.core.toolchain import fingerprint
from tritonbuild.errors import VerifyError
from tritonbuild.repository.assemble import golden_name, write_manifest
from tritonbuild.repository.manifest import (
    MANIFEST_NAME,
    NOT_IN_MANIFEST,
    REPORT_NAME,
    Manifest,
    ManifestModel,
    identity_is_version_digest,
    read_repository,
    serving_needs,
    version_identity,
)
from tritonbuild.repository.rules import check_model_dir
from tritonbuild.server.embedded import (
    LOAD_TIMEOUT_S,
    EmbeddedServer,
    ModelLoadError,
    ServerStartError,
    load_log_cause,
    load_model,
)
from tritonbuild.server.launcher import launcher_for, reported_python
from tritonbuild.server.target import Target, python_side, target_for
from tritonbuild.triton.finding import Finding
from tritonbuild.triton.rules import autocompleted_backend
from tritonbuild.triton.standin import explain_load_error
from tritonbuild.verify.answers import check_model, write_goldens
from tritonbuild.verify.models import ModelReport, VerificationReport
from tritonbuild.verify.runners import InferError, TritonRunner
from tritonbuild.verify.served import served_differences, version_ready
from tritonbuild.verify.triton_core import (
    check_with_triton,
    not_here_cause,
    not_loaded_here,
    without_repeats,
)

Progress = Callable[[str], None]


def static_checks(root: Path, manifest: Manifest) -> list[Finding]:
    out = []
    # NOTE: a server that imported model.py may have left __pycache__/ behind; it is not part of the build.
    present = {
        file.relative_to(root).as_posix()
        for file in root.rglob("*")
        if file.is_file() and "__pycache__" not in file.parts
    } - NOT_IN_MANIFEST
    problems = [f"missing {missing}" for missing in sorted(set(manifest.files) - present)]
    problems += [f"not in manifest: {extra}" for extra in sorted(present - set(manifest.files))]
    for rel, entry in manifest.files.items():
        if rel in present:
            path = root / rel
            if path.stat().st_size != entry.size or sha256_file(path) != entry.sha256:
                problems.append(f"content differs from manifest: {rel}")
    out.append(
        Finding(
            model="*",
            check="manifest",
            ok=not problems,
            detail="; ".join(problems) or f"{len(manifest.files)} files match their sha256",
        )
    )
    out.extend(_binding_checks(manifest))
    for name in sorted({model.name for model in manifest.models}):
        out.extend(check_model_dir(root / name, model_files=True))
    return out


def _binding_checks(manifest: Manifest) -> list[Finding]:
    """What the manifest claims about each model, recomputed from its file list (whose digests the manifest
    check compares with the bytes): the model identity, and goldens that are this model's own file."""
    out = []
    for model in manifest.models:
        problems = []
        own = f"{model.name}/{golden_name(model.version)}"
        if model.goldens is not None and (
            model.goldens != own or model.goldens not in manifest.files
        ):
            problems.append(f"goldens {model.goldens!r} is not this repository's {own}")
        if identity_is_version_digest(model):
            got = version_identity(manifest, model)
            if got != model.model_identity:
                problems.append(
                    f"model identity {model.model_identity[:16]} is not the digest of the files in "
                    f"{model.name}/{model.version}/ ({got[:16]}): the manifest was edited"
                )
        if problems:
            out.append(
                Finding(
                    model=model.name, check="manifest-binding", ok=False, detail="; ".join(problems)
                )
            )
    return out


def _have_gpu() -> bool:
    return bool(fingerprint().get("gpu_name"))


def core_checks(
    root: Path,
    names: list[str],
    say: Progress,
    as_is: frozenset[str] = frozenset(),
    tritonserver: str | None = None,
    target: Target | None = None,
) -> list[Finding]:
    """Triton's own core checks each config (any backend) through a stand-in model, or loads the model itself
    (as_is: those the embedded server runs): one row per model."""
    if not names:
        return []
    try:
        refusals, changes, which = check_with_triton(
            root,
            names,
            progress=say,
            have_gpu=_have_gpu(),
            as_is=as_is,
            launcher=launcher_for(tritonserver, target),
        )
    except ServerStartError as e:
        return [
            Finding(
                model="*",
                check="triton-core",
                ok=True,
                detail=f"not run: {e.message.splitlines()[0]} (static rules only)",
            )
        ]
    rows = []
    elsewhere = {
        name: why
        for name in names
        if name in as_is
        and refusals.get(name)
        and (why := not_here_cause(root / name, refusals[name]))
    }
    for name in names:
        cause = refusals.get(name)
        how = "; ".join(changes.get(name) or []) or "config as written"
        if not (root / name / "config.pbtxt").is_file():
            how += ", no config.pbtxt: what its backend autocompletes from the model file is not seen here"
        accepted = (
            f"{which} loaded the model itself (its initialize() ran)"
            if name in as_is
            else "; ".join(
                filter(
                    None,
                    [
                        f"{which}: Triton's core accepted the config (stand-in: {how})",
                        not_loaded_here(root / name),
                    ],
                )
            )
        )
        steps = [step for step in elsewhere if cause and f"depends on '{step}'" in cause]
        if (
            name in elsewhere or steps
        ):  # this machine is not the serving one: not a refusal of the model
            why = (
                elsewhere.get(name)
                or f"its step {steps[0]!r} was not loaded here ({elsewhere[steps[0]]})"
            )
            rows.append(
                Finding(
                    model=name,
                    check="triton-core",
                    ok=True,
                    detail=(
                        f"not loaded here: {why}; Triton's core accepted the config; verify on the serving machine: "
                        "--tritonserver PATH or --server URL"
                    ),
                )
            )
            continue
        rows.append(
            Finding(
                model=name,
                check="triton-core",
                ok=cause is None,
                detail=f"tritonserver refused it: {cause}" if cause else accepted,
            )
        )
    return rows


def runs_as_written(model_dir: Path, have_gpu: bool) -> bool:
    """A hand-written model the embedded server can load itself (its backend, its devices; no execution
    environment to unpack): verify loads it, so its model.py is imported and its initialize() runs."""
    from tritonbuild.triton.config import ConfigParseError, read_config

    try:
        mc = read_config(model_dir)
    except FileNotFoundError:
        backend = autocompleted_backend(model_dir)[0]
        return bool(backend) and runs_embedded(backend)
    except (OSError, ConfigParseError):
        return False
    gpu = any(type(group).Kind.Name(group.kind) == "KIND_GPU" for group in mc.instance_group)
    return (
        bool(mc.backend)
        and runs_embedded(mc.backend)
        and "EXECUTION_ENV_PATH" not in mc.parameters
        and (have_gpu or not gpu)
    )


def model_dirs(root: Path) -> list[str]:
    """The model directories of a hand-written repository (every directory Triton would poll)."""
    return sorted(
        child.name for child in root.iterdir() if child.is_dir() and not child.name.startswith(".")
    )


def lint(
    root: Path,
    *,
    progress: Progress | None = None,
    tritonserver: str | None = None,
    target: Target | None = None,
) -> VerificationReport:
    """Any Triton model repository (hand-written too, no tritonbuild manifest): Triton's load rules offline, then
    Triton's own core on every config through stand-ins. Nothing is written into the repository."""
    say = progress or (lambda _msg: None)
    names = model_dirs(root)
    if not names:
        raise VerifyError(
            f"{root} is not a tritonbuild repository (no {MANIFEST_NAME}) and holds no model "
            "directory to check",
            hint="build it with 'tritonbuild build RECIPES -o DIR', or pass a "
            "Triton model repository (one directory per model)",
        )
    say("static checks")
    static = [
        finding
        for name in names
        for finding in check_model_dir(root / name, model_files=True, ours=False)
    ]
    have_gpu = _have_gpu()
    as_is = frozenset(name for name in names if runs_as_written(root / name, have_gpu))
    static = without_repeats(static, core_checks(root, names, say, as_is, tritonserver, target))
    return VerificationReport(
        manifest_digest="",
        toolchain=REGISTRY.toolchain(),
        static=static,
        models=[],
        python_side=reported_python(tritonserver, target),
        passed=all(check.ok for check in static),
    )


def verify(
    root: Path,
    *,
    server_url: str | None = None,
    record: bool = False,
    progress: Progress | None = None,
    force: bool = False,
    load_timeout: float = LOAD_TIMEOUT_S,
    tritonserver: str | None = None,
    backends: dict[str, Path] | None = None,
    triton_image: str | None = None,
) -> VerificationReport:
    """triton_image: the image the repository is served by (--triton-image; else the recipes' serving
    image): the embedded server's Python side runs its Python (server/target.py).
    tritonserver: a local binary or 'docker:IMAGE' to run instead of the embedded server (launcher_for).
    backends: Python-based backends (name → directory with model.py, e.g. Triton's vLLM backend) the embedded server
    serves beside its python backend: their models are verified live there, with what their runtime needs from the
    server (the manifest's llm.serving: environment, plugin wheels), as serve runs them."""
    root = Path(root)
    if root.is_dir() and not (root / MANIFEST_NAME).exists() and not server_url and not record:
        target = target_for(triton_image)
        return lint(root, progress=progress, tritonserver=tritonserver, target=target)
    manifest = read_repository(root, VerifyError)
    # with --server its own Python runs: only an image given is reported
    target = target_for(triton_image, None if server_url else manifest)
    ran = python_side(None, None, target, own=True) if server_url else None
    say = progress or (lambda _msg: None)
    say("static checks")
    static = static_checks(root, manifest)
    given = frozenset(backends or {})
    routes = {
        (model.name, model.version): _route_for(model, server_url, manifest, given=given)
        for model in manifest.models
    }
    not_live = sorted(
        {
            model.name
            for model in manifest.models
            if routes[(model.name, model.version)][0] in ("in-process", "none")
        }
    )
    static = without_repeats(
        static, core_checks(root, not_live, say, tritonserver=tritonserver, target=target)
    )
    if not all(check.ok for check in static):
        report = VerificationReport(
            manifest_digest=manifest.digest,
            toolchain=REGISTRY.toolchain(),
            static=static,
            models=[],
            python_side=ran or reported_python(tritonserver, target),
            passed=False,
        )
        return _write_report(root, report)
    reports, updated = [], []
    with ExitStack() as stack:
        server = None
        if any(route == "live-embedded" for route, _ in routes.values()):
            say("starting the embedded tritonserver")
            live = [
                model
                for model in manifest.models
                if routes[(model.name, model.version)][0] == "live-embedded"
            ]
            env, wheels = serving_needs(root, live)
            server = stack.enter_context(
                EmbeddedServer(
                    root,
                    launcher=launcher_for(tritonserver, target),
                    backends=backends,
                    env=env,
                    wheels=wheels,
                )
            )
            routes = {
                key: (
                    route,
                    server.describe() + detail.split(" embedded", 1)[-1]
                    if route == "live-embedded"
                    else detail,
                )
                for key, (route, detail) in routes.items()
            }
        loads = {}
        if server is not None:
            say("loading models")
            live = [
                model
                for model in manifest.models
                if routes[(model.name, model.version)][0] == "live-embedded"
            ]
            loads = _load_all(server, live, load_timeout)
        for model in manifest.models:
            say(f"{model.name} v{model.version}")
            route, detail = routes[(model.name, model.version)]
            url = (
                server_url
                if route == "live-server"
                else (f"http://{server.http_url}" if server else None)
            )
            model_report, updated_model = _verify_model(
                root, model, route, detail, url, record, loads.get(model.name, "not loaded"), force
            )
            if route == "in-process":
                note = (
                    f"not loaded in tritonserver: the embedded server has no {model.backend} backend; pass "
                    "--server URL"
                )
                model_report = model_report.model_copy(
                    update={"notes": [*model_report.notes, note]}
                )
            reports.append(model_report)
            updated.append(updated_model)
    _remove_bytecode(root)
    if record:
        manifest = write_manifest(root, manifest.toolchain, updated)
    report = VerificationReport(
        manifest_digest=manifest.digest,
        toolchain=REGISTRY.toolchain(),
        static=static,
        models=reports,
        recorded=record,
        python_side=ran or reported_python(tritonserver, target),
        passed=all(each.passed for each in reports),
    )
    return _write_report(root, report)


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
    """Triton loads this model's depends_on with it (an ensemble's steps), as its backend declares."""
    backend = REGISTRY.for_manifest(model.backend)
    return backend is not None and backend.loads_dependencies


def _load_all(
    server: EmbeddedServer, models: list[ManifestModel], timeout: float = LOAD_TIMEOUT_S
) -> dict[str, str | None]:
    """Load models concurrently; name → Triton's load error or None. An ensemble's load loads its steps, and a
    second explicit load would reload them (the slow part: a Python stub importing torch), so an ensemble's
    steps are left to it; every other model (BLS included, whose calls Triton cannot see) is loaded itself."""
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


def _remove_bytecode(root: Path) -> None:
    """The Python backend writes __pycache__/ next to model.py; verify leaves the repository as it found it."""
    for d in root.glob("*/*/**/__pycache__"):
        shutil.rmtree(d, ignore_errors=True)


def _route_for(
    model: ManifestModel,
    server_url: str | None,
    manifest: Manifest | None = None,
    _seen: frozenset[str] = frozenset(),
    given: frozenset[str] = frozenset(),
) -> tuple[Route, str]:
    """How verify runs this model (live-embedded, live-server, in-process, or none) and what runs it. given: the
    backends handed to the embedded server (verify --backend), whose models it runs."""
    toolchain = REGISTRY.toolchain()  # the backends' tools too (route_detail names them)
    if server_url:
        return "live-server", f"tritonserver at {redact(server_url)}"
    if model.backend in given:
        version = toolchain.get("tritonserver", "?")
        return "live-embedded", f"tritonserver {version} embedded, {model.backend} backend given"
    if model.name in _seen:
        return (
            "none",
            f"not run: {model.name!r} depends on itself through {sorted(_seen)} (a cycle Triton refuses)",
        )
    if model.depends_on and manifest is not None:
        names = {other.name for other in manifest.models}
        blocked = [
            dependency
            for dependency in model.depends_on
            if dependency not in names
            or _route_for(manifest.model(dependency), None, manifest, _seen | {model.name})[0]
            != "live-embedded"
        ]
        if blocked:
            return (
                "none",
                f"not run here: calls {blocked}, which the embedded server cannot load (--server URL)",
            )
    if model.target == "gpu" and not (
        toolchain.get("gpu_name") and runs_embedded(model.backend) and not model.llm
    ):
        return (
            "none",
            f"not run here: needs a GPU server with the {model.backend} backend (verify --server URL)",
        )
    if runs_embedded(model.backend):
        gpu = f", {toolchain['gpu_name']}" if model.target == "gpu" else ""
        return "live-embedded", f"tritonserver {toolchain.get('tritonserver', '?')} embedded{gpu}"
    backend = REGISTRY.for_manifest(model.backend)
    if backend is not None and backend.route == "in-process":
        return "in-process", backend.route_detail(toolchain)
    return "none", f"no way to run backend {model.backend} here"


def _live_runner(url: str, model: ManifestModel):
    """HTTP infer, or Triton's generate endpoints for a backend whose models answer decoupled (vLLM)."""
    backend = REGISTRY.for_manifest(model.backend)
    if backend is not None and backend.live_protocol == "generate":
        from tritonbuild.verify.generate import GenerateRunner

        return GenerateRunner(url, model)
    return TritonRunner(url, model)


def _verify_model(
    root: Path,
    model: ManifestModel,
    route: Route,
    detail: str,
    url: str | None,
    record: bool,
    load_error: str | None = None,
    force: bool = False,
) -> tuple[ModelReport, ManifestModel]:
    base = {
        "name": model.name,
        "version": model.version,
        "backend": model.backend,
        "route": route,
        "route_detail": detail,
        "goldens": model.goldens,
    }
    if route == "none":
        return ModelReport(
            **{**base, "route_detail": "not checked here"},
            loaded=False,
            passed=False,
            checked=False,
            notes=[detail],
        ), model
    try:
        if route == "in-process":
            version_dir = root / model.name / str(model.version)
            runner = REGISTRY.for_manifest(model.backend).in_process_runner(version_dir, model)
        elif route == "live-embedded":
            if load_error:
                raise ModelLoadError(load_error)
            runner = _live_runner(url, model)
        else:
            if not version_ready(
                url, model
            ):  # NOTE: a load of a served model reloads it (a second vLLM engine)
                load_model(url, model.name)
            served, base["served"] = served_differences(url, root, model)
            if served:
                return ModelReport(
                    **base,
                    loaded=True,
                    passed=False,
                    load_error=f"the server at {url} does not serve this build of {model.name!r}: "
                    + "; ".join(served),
                ), model
            runner = _live_runner(url, model)
    except ModelLoadError as e:
        return ModelReport(**base, loaded=False, load_error=e.message, passed=False), model
    except ImportError as e:
        extra = (
            REGISTRY.for_manifest(model.backend).runner_extra()
            if route == "in-process"
            else "embedded"
        )
        return ModelReport(
            **base,
            loaded=False,
            load_error=f"{e}: pip install 'tritonbuild[{extra}]'",
            passed=False,
        ), model
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own types on a bad model
        return ModelReport(
            **base, loaded=False, load_error=f"{type(e).__name__}: {e}", passed=False
        ), model
    try:
        result = check_model(model, runner, root, record, force)
    except InferError as e:
        return ModelReport(**base, loaded=True, passed=False, infer_error=str(e)), model
    except Exception as e:  # in-process runtimes (onnxruntime, torch) raise their own types
        if route != "in-process":
            raise
        return ModelReport(
            **base, loaded=True, passed=False, infer_error=f"{type(e).__name__}: {e}"
        ), model
    finally:
        runner.close()
    recorded = result.pop("_record", None)
    if recorded is not None:
        model, note, refusal = write_goldens(root, model, *recorded, force=force)
        base["goldens"] = model.goldens
        result["notes"] = [*result["notes"], *(x for x in (note, refusal) if x)]
        result["passed"] = result["passed"] and refusal is None
        result["goldens_refused"] = refusal
    return ModelReport(**base, loaded=True, **result), model
