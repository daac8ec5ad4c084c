"""serve: which models of a repository (a built directory, a hand-written one, or a publish
target URL) the embedded tritonserver loads and which it cannot, and the server, started, as the
ready line reports it."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tritonbuild.backends import REGISTRY, runs_embedded
from tritonbuild.core.results import Result
from tritonbuild.core.stores import as_location
from tritonbuild.core.toolchain import fingerprint
from tritonbuild.errors import ServerError, VerifyError
from tritonbuild.publish.inspect import list_opened
from tritonbuild.publish.objects import read_state, read_text, target_url
from tritonbuild.publish.protocol import open_for_read
from tritonbuild.repository.manifest import MANIFEST_NAME, read_repository, serving_needs
from tritonbuild.server.embedded import EmbeddedServer
from tritonbuild.server.interpreters import PYTHONS
from tritonbuild.server.launcher import BACKEND_ENTRY, launcher_for
from tritonbuild.server.target import EMBEDDED, ServingTarget
from tritonbuild.triton.config import ConfigParseError, parse, read_config

__all__ = ["BACKEND_ENTRY", "ServeReady", "Serving", "serve"]


@dataclass
class ServeReady(Result):
    """The started server: where it answers, what it runs, which models it loaded and which not,
    the Python its Python side runs on beside the target image's (server/target.py:python_side)."""

    http: str
    grpc: str
    metrics: str
    tritonserver: str
    version: str | None
    repository: str
    loaded: list[str]
    not_loaded: list[str]
    model_control_mode: str
    strict_readiness: bool
    log: str
    python_side: dict


@dataclass
class Serving:
    """A server not yet started, the models it can load, the models it cannot (their backend is
    not in the embedded server)."""

    server: EmbeddedServer
    loadable: list[str]
    not_loadable: list[str] = field(default_factory=list)

    def start(self) -> ServeReady:
        """Start the server; under explicit model control, every loadable model loads as it starts
        (tritonserver's --load-model: the server listens, and so answers ready, only once they
        have loaded), then a model that failed is named with Triton's reason."""
        server = self.server
        if server.control == "explicit":
            server.startup_models = list(self.loadable)
        server.start()
        if server.control == "explicit":
            server.check_loaded(self.loadable)
            _check_served(server, self.loadable)
        return ServeReady(
            http=f"http://{server.http_url}",
            grpc=server.grpc_url,
            metrics=server.metrics_url,
            tritonserver=server.describe(),
            version=server.version,
            repository=server.repository,
            loaded=self.loadable,
            not_loaded=self.not_loadable,
            model_control_mode=server.control,
            strict_readiness=server.strict_readiness,
            log=str(server.log_path),
            python_side=server.launcher.python_side(),
        )


def serve(
    repository: str | Path,
    *,
    endpoint_url: str | None = None,
    serving: ServingTarget = EMBEDDED,
    control: str = "explicit",
    ports: tuple[int, int, int] | None = None,
    log_path: Path | None = None,
    log_verbose: int = 0,
    poll_secs: int = 1,
    backends: dict[str, Path] | None = None,
    strict_readiness: bool = True,
) -> Serving:
    """The server (not yet started) for a built or hand-written repository directory or a publish
    target (its URL, or a directory holding one), the models it can load, the models it cannot.

    endpoint_url: the S3-compatible endpoint of a target URL. serving: the tritonserver that runs
    (else the embedded one) and the image served by (its Python runs the Python side; else the one
    a built repository's recipes name). control: 'explicit' (load the models once at start) or
    'poll' (tritonserver follows the repository). ports: (http, grpc, metrics), 0 or None a free
    one. log_path: where the server log goes (default: a temporary file). log_verbose:
    tritonserver's --log-verbose. poll_secs: how often a polling server re-reads the repository.
    backends: Python-based backends served beside the python backend (name → the directory holding
    its model.py), whose models are then loaded too. strict_readiness: tritonserver's
    --strict-readiness (False: ready while models load)."""
    options = {
        "control": control,
        "ports": ports,
        "log_path": log_path,
        "log_verbose": log_verbose,
        "poll_secs": poll_secs,
        "backends": backends,
        "strict_readiness": strict_readiness,
    }
    # NOTE: a directory holding a publish target (a file:// target by its path, a synced copy) is
    # served as the target it is: its live versions, with their portable numerics
    url = target_url(repository)
    if url is not None:
        image = serving.target
        return _published(
            url,
            endpoint_url,
            options,
            lambda sources: launcher_for(serving, sources),
            # the embedded server may run on another Python than this one: it needs the models'
            # imports installed for that one
            other_python=image is not None or sys.version_info[:2] not in PYTHONS,
        )
    root = Path(repository)
    # what the target's Python gets installed: the repository's and the backends' imports
    sources = (root, *(backends or {}).values())
    if not (root / MANIFEST_NAME).exists():
        launcher = launcher_for(serving, sources)
        return _hand_written(root, {**options, "launcher": launcher})
    manifest = read_repository(root, VerifyError)
    launcher = launcher_for(serving.for_repository(manifest), sources)
    return _built(root, manifest, {**options, "launcher": launcher})


def _published(
    url: str, endpoint_url: str | None, server_options: dict, launcher, other_python: bool
) -> Serving:
    """A target's models that are live (published) or loadable as they lie (a plain directory);
    launcher(sources) gets a copy of their Python files (what the target's Python must import,
    server/mirror.py)."""
    target = open_for_read(as_location(url, endpoint_url))
    names, loadable, configs = [], [], {}
    for entry in list_opened(target).models:
        config = read_text(target, target.path(entry.name, "config.pbtxt"))
        model_config = parse(config) if config is not None else None
        # published: config.pbtxt pins the live version; a plain directory (nothing published
        # there): Triton loads by the config's own version_policy, so a config that pins nothing
        # is loadable
        plain = (
            bool(entry.present)
            and not entry.complete
            and model_config is not None
            and not model_config.version_policy.HasField("specific")
        )
        if model_config is None or not (entry.live is not None or plain):
            continue
        names.append(entry.name)
        configs[entry.name] = model_config
        if runs_embedded(model_config.backend):
            loadable.append(entry.name)
    loadable = with_ensembles(configs, loadable)
    with tempfile.TemporaryDirectory(prefix="tritonbuild-imports-") as scratch:
        chosen = launcher(_python_files(target, loadable, Path(scratch)) if other_python else ())
    # the live versions' portable numerics, set before the server's Python side loads them
    env = read_state(target).numerics_env()
    server = EmbeddedServer(target.triton_url(), **server_options, env=env, launcher=chosen)
    return Serving(server, loadable, sorted(set(names) - set(loadable)))


def _python_files(target, names: list[str], scratch: Path) -> tuple[Path, ...]:
    """The models' *.py files copied from the target into scratch."""
    if not names:
        return ()
    for name in names:
        prefix = target.path(name)
        for path in target.fs.find(prefix):
            if path.endswith(".py"):
                copy = scratch / name / path[len(prefix) :].lstrip("/")
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy.write_bytes(read_text(target, path) or b"")
    return (scratch,)


def with_ensembles(configs: dict, loadable: list[str]) -> list[str]:
    """loadable, and the ensembles whose every step is (Triton's core runs an ensemble, and loading
    it loads its steps): an ensemble has no backend of its own, and was listed 'not loaded' while
    the server had it READY."""
    out = list(loadable)
    grew = True
    while grew:
        grew = False
        for name, config in configs.items():
            if (
                name not in out
                and config is not None
                and config.HasField("ensemble_scheduling")
                and all(step.model_name in out for step in config.ensemble_scheduling.step)
            ):
                out.append(name)
                grew = True
    return out


def _config(model_dir: Path):
    try:
        return read_config(model_dir)
    except (OSError, ConfigParseError):
        return None


def _hand_written(root: Path, server_options: dict) -> Serving:
    """What Triton would load, by each model's config."""
    # NOTE: imported here: a built repository's or a URL's serve does not pay for verify's static
    # checks (plan and steps: 0.05 s, measured)
    from tritonbuild.verify.static import model_dirs, runs_as_written

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
    loadable = with_ensembles({name: _config(root / name) for name in names}, loadable)
    server = EmbeddedServer(root, **server_options)
    return Serving(server, loadable, sorted(set(names) - set(loadable)))


def _built(root: Path, manifest, server_options: dict) -> Serving:
    """The manifest's CPU models of backends the embedded server has, and those of a backend
    serve --backend adds; with the environment and wheels they need to be served."""
    names = sorted({model.name for model in manifest.models})
    extra = set(server_options.get("backends") or {})
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
    server = EmbeddedServer(root, **server_options, env=env, wheels=wheels)
    return Serving(server, loadable, sorted(set(names) - set(loadable)))


def _check_served(server: EmbeddedServer, loaded: list[str]) -> None:
    """What the server's log says its runtimes chose for the loaded models of a built repository
    (Backend.served_check: an invariant vLLM model on its plugin's kernel); a problem stops the
    server and names it (ServerError, exit 8)."""
    root = Path(server.repository)
    if not (root / MANIFEST_NAME).is_file():
        return
    try:
        models = read_repository(root, VerifyError).models
    except VerifyError:  # a publish target's manifest (serve URL): not a built repository's
        return
    log = server.log_path.read_text(errors="replace")
    problems = [
        f"{model.name} v{model.version}: {problem}"
        for model in models
        if model.name in loaded and (backend := REGISTRY.for_manifest(model.backend))
        for problem in backend.served_check(model, log)[0]
    ]
    if problems:
        server.stop()
        raise ServerError(
            "; ".join(problems),
            where=str(server.log_path),
            hint="install the model's plugin wheel into the server's Python and serve it with "
            "the manifest's environment (tritonbuild serve does both), then start again",
        )
