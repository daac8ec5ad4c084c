"""What verify checks before any model answers: the manifest against the files on disk and
against itself, Triton's load rules, Triton's own core on every config (through stand-ins, or the
model itself where the embedded server runs it); and lint, the same over a hand-written repository
(no tritonbuild manifest)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tritonbuild.backends import REGISTRY, runs_embedded
from tritonbuild.core.hashing import sha256_bytes, sha256_file
from tritonbuild.core.toolchain import fingerprint
from tritonbuild.errors import VerifyError
from tritonbuild.repository.assemble import golden_name
from tritonbuild.repository.manifest import (
    MANIFEST_NAME,
    NOT_IN_MANIFEST,
    Manifest,
    identity_is_version_digest,
    version_identity,
)
from tritonbuild.repository.rules import check_model_dir
from tritonbuild.server.embedded import ServerStartError
from tritonbuild.server.launcher import launcher_for, reported_python
from tritonbuild.server.target import EMBEDDED, ServingTarget
from tritonbuild.triton.config import CONFIG_FILE
from tritonbuild.triton.finding import Finding
from tritonbuild.triton.model_dir import ModelDir, ModelDirs
from tritonbuild.triton.rules import autocompleted_backend
from tritonbuild.verify.models import VerificationReport
from tritonbuild.verify.triton_core import (
    check_with_triton,
    not_here_cause,
    not_loaded_here,
    without_repeats,
)

Progress = Callable[[str], None]


def static_checks(root: Path, manifest: Manifest, models: ModelDirs | None = None) -> list[Finding]:
    """The manifest against the files and itself, and each model's load rules. models: root's model
    directories as read (each config.pbtxt read once: its digest is taken from those bytes)."""
    models = models or ModelDirs(root)
    configs = {f"{model.name}/{CONFIG_FILE}": model.name for model in manifest.models}
    out = []
    # NOTE: a server that imported model.py may have left __pycache__/ behind; it is not part of the
    # build.
    present = {
        file.relative_to(root).as_posix()
        for file in root.rglob("*")
        if file.is_file() and "__pycache__" not in file.parts
    } - NOT_IN_MANIFEST
    problems = [f"missing {missing}" for missing in sorted(set(manifest.files) - present)]
    problems += [f"not in manifest: {extra}" for extra in sorted(present - set(manifest.files))]
    for rel, entry in manifest.files.items():
        if rel in present and not _matches(root, rel, entry, models, configs):
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
        out.extend(check_model_dir(root / name, model_files=True, models=models))
    return out


def _matches(root: Path, rel: str, entry, models: ModelDirs, configs: dict[str, str]) -> bool:
    """A file's size and sha256 are the manifest's (a model's config.pbtxt: the bytes read)."""
    raw = models[configs[rel]].raw if rel in configs else None
    if raw is not None:
        return len(raw) == entry.size and sha256_bytes(raw) == entry.sha256
    path = root / rel
    return path.stat().st_size == entry.size and sha256_file(path) == entry.sha256


def _binding_checks(manifest: Manifest) -> list[Finding]:
    """What the manifest claims about each model, recomputed from its file list (whose digests the
    manifest check compares with the bytes): the model identity, and goldens that are this model's
    own file."""
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
    serving: ServingTarget = EMBEDDED,
    sources: tuple[Path, ...] | None = None,
    models: ModelDirs | None = None,
) -> list[Finding]:
    """Triton's own core checks each config (any backend) through a stand-in model, or loads the
    model itself (as_is: those the embedded server runs): one row per model, on the tritonserver
    and target image serving names. sources: the Python files whose imports the target's Python
    gets (server/mirror.py; default: the repository's). models: root's model directories as read
    (by default read here)."""
    if not names:
        return []
    models = models or ModelDirs(root)
    try:
        refusals, changes, which = check_with_triton(
            root,
            names,
            progress=say,
            have_gpu=_have_gpu(),
            as_is=as_is,
            launcher=launcher_for(serving, (root,) if sources is None else sources),
            models=models,
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
    elsewhere = {
        name: why
        for name in names
        if name in as_is
        and refusals.get(name)
        and (why := not_here_cause(models[name], refusals[name]))
    }
    return [
        _core_row(models[name], refusals.get(name), changes.get(name), which, as_is, elsewhere)
        for name in names
    ]


def _core_row(
    read: ModelDir,
    cause: str | None,
    changes: list[str] | None,
    which: str,
    as_is: frozenset[str],
    elsewhere: dict[str, str],
) -> Finding:
    """One model's Triton-core row: accepted (how), refused (Triton's cause), or not loaded here
    (this machine is not the serving one, for the model or a step it depends on)."""
    name = read.name
    steps = [step for step in elsewhere if cause and f"depends on '{step}'" in cause]
    if name in elsewhere or steps:
        # this machine is not the serving one: not a refusal of the model
        why = (
            elsewhere.get(name)
            or f"its step {steps[0]!r} was not loaded here ({elsewhere[steps[0]]})"
        )
        return Finding(
            model=name,
            check="triton-core",
            ok=True,
            detail=(
                f"not loaded here: {why}; Triton's core accepted the config; verify on the serving "
                "machine: --tritonserver PATH or --server URL"
            ),
        )
    if cause:
        return Finding(
            model=name, check="triton-core", ok=False, detail=f"tritonserver refused it: {cause}"
        )
    if name in as_is:
        accepted = f"{which} loaded the model itself (its initialize() ran)"
    else:
        how = "; ".join(changes or []) or "config as written"
        if read.raw is None:
            how += (
                ", no config.pbtxt: what its backend autocompletes from the model file is not "
                "seen here"
            )
        accepted = "; ".join(
            filter(
                None,
                [
                    f"{which}: Triton's core accepted the config (stand-in: {how})",
                    not_loaded_here(read),
                ],
            )
        )
    return Finding(model=name, check="triton-core", ok=True, detail=accepted)


def runs_as_written(model_dir: Path | ModelDir, have_gpu: bool) -> bool:
    """A hand-written model the embedded server can load itself (its backend, its devices; no
    execution environment to unpack): verify loads it, so its model.py is imported and its
    initialize() runs."""
    read = ModelDir.given(model_dir)
    if read.raw is None and not read.unreadable:
        backend = autocompleted_backend(read.path)[0]
        return bool(backend) and runs_embedded(backend)
    mc = read.config
    if mc is None:
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
    root: Path, *, progress: Progress | None = None, serving: ServingTarget = EMBEDDED
) -> VerificationReport:
    """Any Triton model repository (hand-written too, no tritonbuild manifest): Triton's load rules
    offline, then Triton's own core on every config through stand-ins. Nothing is written into the
    repository."""
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
    models = ModelDirs(root)
    static = [
        finding
        for name in names
        for finding in check_model_dir(root / name, model_files=True, ours=False, models=models)
    ]
    have_gpu = _have_gpu()
    as_is = frozenset(name for name in names if runs_as_written(models[name], have_gpu))
    core = core_checks(root, names, say, as_is, serving, models=models)
    static = without_repeats(static, core)
    return VerificationReport(
        manifest_digest="",
        toolchain=REGISTRY.toolchain(),
        static=static,
        models=[],
        python_side=reported_python(serving, (root,)),
        passed=all(check.ok for check in static),
    )
