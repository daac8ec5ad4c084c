"""The repository manifest (tritonbuild-manifest.json): every file, its digest, where each model
came from."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from tritonbuild.core.cas import FileEntry
from tritonbuild.core.hashing import sha256_bytes
from tritonbuild.core.omit import OmitWhenNone
from tritonbuild.errors import TritonBuildError, UsageError, VerifyError
from tritonbuild.recipe.models import TensorSpec, Verify

SCHEMA_VERSION = 1
MANIFEST_NAME = "tritonbuild-manifest.json"
REPORT_NAME = "tritonbuild-verification.json"
NOT_IN_MANIFEST = {MANIFEST_NAME, REPORT_NAME}


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ManifestModel(_Frozen, OmitWhenNone):
    # NOTE: absent for native models: records written before numerics keep their bytes
    omit_when_none = ("numerics",)

    name: str
    version: int
    backend: str
    target: str
    recipe_path: str
    recipe_sha256: str
    model_identity: str = Field(
        description="sha256 over the version directory's files (the weights)."
    )
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    max_batch_size: int
    verify: Verify
    goldens: str | None = Field(None, description="Repository-relative golden .npz, when present.")
    goldens_source: str | None = Field(
        None, description="Where 'verify --record' writes goldens (recipe's path)."
    )
    steps: dict[str, str] = Field(description="Step kind → cache key.")
    depends_on: list[str] = Field(
        default_factory=list, description="Models this one calls (ensembles, BLS)."
    )
    llm: dict | None = Field(
        None,
        description="LLM group facts: group, quant_algo (e.g. W4A16), TRT-LLM "
        "version, engine path, world size, memory plan.",
    )
    numerics: dict | None = Field(
        None,
        description="The recipe's numerics: portable: {mode, cpus, threads, env}, the variables "
        "every process that runs the model gets before its math libraries load (verify's worker, "
        "the server). Absent: native.",
    )


class Manifest(_Frozen):
    schema_version: int = SCHEMA_VERSION
    toolchain: dict[str, str]
    models: list[ManifestModel]
    files: dict[str, FileEntry]

    def to_bytes(self) -> bytes:
        from tritonbuild.core.hashing import pretty_json

        return pretty_json(self.model_dump(mode="json"))

    @property
    def digest(self) -> str:
        return sha256_bytes(self.to_bytes())

    def model(self, name: str) -> ManifestModel:
        return next(model for model in self.models if model.name == name)


def version_identity(manifest: Manifest, model: ManifestModel) -> str:
    """sha256 over the version directory's files, from the manifest's entries (what assemble
    computes)."""
    from tritonbuild.core.hashing import sha256_json

    prefix = f"{model.name}/{model.version}/"
    return sha256_json(
        {k[len(prefix) :]: e.sha256 for k, e in manifest.files.items() if k.startswith(prefix)}
    )


def identity_is_version_digest(model: ManifestModel) -> bool:
    """Models whose identity is version_identity: not pipelines (whose identity covers their steps)
    nor LLM groups (whose identity is the engine's)."""
    from tritonbuild.backends import REGISTRY

    owner = REGISTRY.for_manifest(model.backend)  # a pipeline's identity covers the models it calls
    return (
        model.llm is None
        and not model.depends_on
        and not (owner is not None and owner.needs_built_models)
    )


def read_manifest(root: Path) -> Manifest:
    return Manifest.model_validate_json((root / MANIFEST_NAME).read_bytes())


def read_repository(root: Path, error: type[TritonBuildError]) -> Manifest:
    """The manifest of a built repository; a missing or invalid one raises `error` (the asking
    stage's class, so that e.g. publish exits with the publish code)."""
    try:
        return read_manifest(root)
    except FileNotFoundError:
        raise error(
            f"{root} is not a tritonbuild repository (no {MANIFEST_NAME})",
            hint="build it with 'tritonbuild build RECIPES -o DIR'",
        ) from None
    except ValueError as e:
        if _is_target_manifest(root / MANIFEST_NAME):
            raise error(
                f"{root} holds a publish target's {MANIFEST_NAME} (what 'tritonbuild publish' "
                "writes at a target), not a built repository's",
                where=str(root / MANIFEST_NAME),
                hint=f"verify, serve and infer take it as it is ('tritonbuild verify {root}'); "
                "to publish, pass the directory 'tritonbuild build' wrote",
            ) from None
        first = e.errors()[0] if hasattr(e, "errors") and e.errors() else None
        why = f"{'.'.join(map(str, first['loc'])) or 'document'}: {first['msg']}" if first else e
        raise error(
            f"not a valid build manifest ({why})",
            where=str(root / MANIFEST_NAME),
            hint="rebuild the repository",
        ) from None


def _is_target_manifest(path: Path) -> bool:
    try:
        return target_manifest_shape(json.loads(path.read_bytes()))
    except (OSError, ValueError):
        return False


def target_manifest_shape(data) -> bool:
    """Parsed JSON shaped as a publish target's manifest (publish/models.TargetManifest: models by
    name, each with its versions), not a build's (models listed, a toolchain)."""
    models = data.get("models") if isinstance(data, dict) else None
    return (
        isinstance(models, dict)
        and "toolchain" not in data
        and all(isinstance(model, dict) and "versions" in model for model in models.values())
    )


def newest_version(root: Path, model: str) -> ManifestModel:
    """The newest version of model in the built repository at root; a usage error naming the models
    there."""
    manifest = read_repository(root, VerifyError)
    found = [entry for entry in manifest.models if entry.name == model]
    if not found:
        names = sorted({entry.name for entry in manifest.models})
        raise UsageError(
            f"{root} has no model {model!r}", hint=f"one of: {', '.join(names) or '-'}"
        )
    return max(found, key=lambda entry: entry.version)


def numerics_env(models) -> dict[str, str]:
    """The variables of the models' portable numerics (ManifestModel.numerics), for one process that
    runs them all: models asking different settings cannot share it (refused)."""
    env: dict[str, str] = {}
    owner: dict[str, str] = {}
    for model in models:
        for key, value in ((getattr(model, "numerics", None) or {}).get("env") or {}).items():
            if key in env and env[key] != value:
                raise VerifyError(
                    f"models {owner[key]!r} and {model.name!r} ask different numerics settings "
                    f"({key}={env[key]} vs {value}); one server process serves every model and "
                    "its math libraries read them once",
                    hint="give their recipes the same numerics (cpus, threads), or serve them "
                    "from separate repositories",
                )
            env[key], owner[key] = value, model.name
    return env


def serving_needs(root: Path, models) -> tuple[dict[str, str], list[Path]]:
    """What the models' runtime needs from the server process: the manifest's llm.serving (a vLLM
    model's determinism: invariant: environment variables and plugin wheels shipped in the version
    directories) and a model's portable numerics (numerics_env). One server process serves every
    model: the variables apply to all (invariant, or portable, is then everyone's mode)."""
    env, wheels = numerics_env(models), []
    for model in models:
        serving = (model.llm or {}).get("serving") or {}
        env.update(serving.get("env") or {})
        wheels += [
            root / model.name / str(model.version) / rel for rel in serving.get("plugins") or []
        ]
    return env, sorted(set(wheels))
