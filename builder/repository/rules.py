"""Triton's load rules, checked offline on a model directory (core/src/model_config_utils.cc and
friends)."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.backends import REGISTRY, Backend, BuildPolicy, ReleaseFact
from tritonbuild.triton.backend_kinds import ACCEPTED_KINDS, instance_kind_problems
from tritonbuild.triton.config import parse
from tritonbuild.triton.ensemble_rules import core_model_problems
from tritonbuild.triton.finding import Finding
from tritonbuild.triton.model_dir import ModelDir, ModelDirs
from tritonbuild.triton.rules import (
    CORE_DEFAULT_FILES,
    NAME_MISMATCH,
    VERSION_RE,
    autocompleted_backend,
    backend_after_autofill,
    model_problems,
)


def check_model_dir(
    model_dir: Path | ModelDir,
    *,
    model_files: bool = False,
    ours: bool = True,
    models: ModelDirs | None = None,
) -> list[Finding]:
    """Triton's load rules on one model directory; model_files: also open the model files (a
    backend's model_content_checks, e.g. the ONNX graph through onnxruntime: verify does, a build
    does not pay for it). ours: a repository tritonbuild built; any other is judged as Triton would
    (a missing config.pbtxt is autocompleted, tritonbuild's build policies are notes, not failures).
    No backend is named here: each backend's rules come from the registry (backends/base.py).
    models: the repository's directories as verify read them (each read once: an ensemble's steps
    are looked up there); by default model_dir's repository, read here."""
    models = ModelDirs.of(model_dir, models)
    read = models[model_dir.name]
    name, model_dir = read.name, read.path
    out: list[Finding] = []

    def add(check: str, problems: list[str], ok_detail: str) -> None:
        out.append(_finding(name, check, problems, ok_detail, ours))

    mc = _read_config(read, ours, add)
    if mc is None:
        return out

    triton = model_problems(mc, model_dir)
    # the directory-name rule is reported once, in Triton's words, as this row (not again in
    # "triton-rules")
    misnamed = [p for p in triton if p.startswith(NAME_MISMATCH)]
    add(
        "name",
        misnamed
        or ([f"{name!r} contains '/' or is '..'"] if "/" in name or name in (".", "..") else []),
        f"directory name = model name = {name!r}",
    )

    versions, bad = _versions(read, mc.version_policy)
    add("versions", bad, f"versions {versions}")

    # every backend-specific rule comes from the registry: the backend owning the config (by its
    # backend field, else its platform), then any backend that also writes models of that Triton
    # backend
    owner = REGISTRY.for_config(mc.backend, mc.platform)
    others = [b for b in REGISTRY.also_writing(mc.backend) if b is not owner]
    for row in _backend_rows(mc, read, models, owner, others):
        add(*row)
    add(
        "triton-rules",
        [p for p in triton if p not in misnamed],
        "Triton's config rules (model_config_utils, ported) hold",
    )
    if model_files:
        for backend in ([owner] if owner is not None else []) + others:
            for row in backend.model_content_checks(mc, model_dir, versions):
                add(*row)
    return out


def _finding(name: str, check: str, problems: list[str], ok_detail: str, ours: bool) -> Finding:
    """One row. On a repository tritonbuild did not build, a build policy's problem is a note (not
    checked) and a fact of a backend release makes the row say what it depends on; neither fails
    it."""
    policy = [p for p in problems if isinstance(p, BuildPolicy)] if not ours else []
    release = [p for p in problems if isinstance(p, ReleaseFact)] if not ours else []
    problems = [p for p in problems if p not in policy and p not in release]
    if release:  # the ok detail would claim what is not known
        ok_detail = "; ".join(f"depends on the backend release: {p}" for p in release)
    if policy:
        ok_detail = "; ".join(
            [
                ok_detail,
                *(
                    f"not checked: {p} (tritonbuild's build policy, applied only "
                    f"to repositories it built)"
                    for p in policy
                ),
            ]
        )
    return Finding(
        model=name,
        check=check,
        ok=not problems,
        detail="; ".join(problems) if problems else ok_detail,
    )


def _backend_rows(
    mc, read: ModelDir, models: ModelDirs, owner: Backend | None, others: list[Backend]
) -> list[tuple[str, list[str], str]]:
    """(check, problems, ok detail) rows of the backends: the ensemble's core rules, or the owner's
    model files (or, without an owner, what Triton's core knows), then the other writers' model
    files, then the owner's own load rules."""
    model_dir, versions = read.path, read.versions
    core = core_model_problems(mc, models)
    if core is not None:
        rows = [
            (
                "model_file",
                core,
                "ensemble steps match their models' configs (Triton's ensemble_utils rules)",
            )
        ]
    elif owner is not None:
        rows = [*owner.model_file_checks(mc, model_dir, versions)]
    else:
        rows = _unknown_backend_rows(mc, model_dir, versions)
    for other in others:
        rows += other.model_file_checks(mc, model_dir, versions)
    if owner is not None:
        rows += owner.offline_checks(mc, model_dir, versions)
    return rows


def _versions(read: ModelDir, policy) -> tuple[list[int], list[str]]:
    """The numeric version directories, and what Triton would make of the others and of the version
    policy."""
    versions, bad = read.versions, []
    for child in read.dirs:
        if not VERSION_RE.match(child) and child[:1].isdigit():
            bad.append(
                f"version directory {child!r} is not a plain number (Triton ignores a "
                "leading 0 and reads '2_old' as 2)"
            )
    if not versions:
        bad.append("no numeric version directory: Triton reports 'no version is available'")
    if policy.WhichOneof("policy_choice") == "specific":
        missing = sorted(set(policy.specific.versions) - set(versions))
        if missing:
            bad.append(f"version_policy.specific names versions {missing} that are not present")
    return versions, bad


def _read_config(read: ModelDir, ours: bool, add):
    """The model's ModelConfig, its config.parse row added; None when there is nothing more to
    check. Without a config.pbtxt Triton autocompletes one (unless started with
    --disable-auto-complete-config): the backend found from the version directory's model file, the
    backend's own auto_complete_config for the rest."""
    if read.raw is None and not read.unreadable:
        backend, problems = autocompleted_backend(read.path)
        if ours or problems:
            add("config.parse", problems or ["config.pbtxt is missing"], "")
            return None
        add(
            "config.parse",
            [],
            f"no config.pbtxt: Triton autocompletes it (backend {backend} from the model "
            f"file; the {backend} backend fills inputs, outputs and batching)",
        )
        mc = parse(b"")
        mc.backend = backend
        return mc
    if read.config is None:
        add("config.parse", [f"config.pbtxt:{read.error} (not a valid inference.ModelConfig)"], "")
        return None
    add("config.parse", [], "config.pbtxt parses as inference.ModelConfig")
    return read.config


def _unknown_backend_rows(
    mc, model_dir: Path, versions: list[int]
) -> list[tuple[str, list[str], str]]:
    """A backend tritonbuild has no plug-in for: its model-file row, and the instance kinds it
    refuses where they are recorded (triton/backend_kinds.py)."""
    found = [_unknown_backend_files(mc, model_dir, versions)]
    backend = backend_after_autofill(mc, model_dir)
    if backend in ACCEPTED_KINDS:
        found.append(
            (
                "instance_kind",
                instance_kind_problems(mc, backend),
                "every instance group of a kind the "
                f"{backend} backend takes ({', '.join(ACCEPTED_KINDS[backend][0])})",
            )
        )
    return found


def _unknown_backend_files(mc, model_dir: Path, versions: list[int]) -> tuple[str, list[str], str]:
    """The model-file row of a backend tritonbuild has no plug-in for: Triton's core names the file
    of the TensorFlow platforms (checked); any other backend decides itself which files it loads
    (not checked)."""
    filename = mc.default_model_filename or CORE_DEFAULT_FILES.get(mc.platform, "")
    if mc.platform in CORE_DEFAULT_FILES:
        problems = [
            f"{v}/{filename} is missing (Triton's core names it for platform {mc.platform}; the "
            "backend loads that file)"
            for v in versions
            if not (model_dir / str(v) / filename).exists()
        ]
        return "model_file", problems, f"{filename} present in every version"
    what = mc.backend or mc.platform or "(none given)"
    return (
        "model_file",
        [],
        (
            f"not checked: tritonbuild has no rules for backend {what} (which files it "
            "loads, which instance kinds it takes are that backend's); Triton's core rules "
            "were checked: load it on a server that has the backend (verify --server URL)"
        ),
    )
