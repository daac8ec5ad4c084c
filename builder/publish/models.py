"""What lives at a publish target besides the models, and what a publish did."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tritonbuild.core.cas import FileEntry
from tritonbuild.core.omit import OmitWhenNone
from tritonbuild.repository.manifest import numerics_env

SCHEMA_VERSION = 1
TARGET_MANIFEST = "tritonbuild-manifest.json"  # at the target root: the commit marker, written last
LOCK_NAME = "tritonbuild.lock"  # at the target root (Triton ignores root files; a folder would be a "model")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PublishedVersion(_Frozen, OmitWhenNone):
    # NOTE: absent for native models: records written before numerics keep their bytes
    omit_when_none = ("numerics", "steps_identity")

    files: dict[str, FileEntry] = Field(
        description="Model-directory relative path → digest and size."
    )
    source_manifest: str = Field(
        description="sha256 of the repository manifest it was published from."
    )
    verification: Literal["passed", "skipped"]
    model_identity: str
    config_sha256: str | None = Field(
        None,
        description="sha256 of <model>/config-v<N>.pbtxt at the target: the "
        "config this version was built and verified with, pinned "
        "to it (restored by rollback). None: published before "
        "tritonbuild stored it.",
    )
    numerics: dict | None = Field(
        None,
        description="The version's portable numerics (the build manifest's numerics: mode, cpus, "
        "threads, env): the variables a server sets before it loads the version. Absent: native.",
    )
    steps_identity: dict[str, str] | None = Field(
        None,
        description="An ensemble's or BLS's: each model it calls → sha256 over that model's "
        "files, whole config and its own calls, as published with this version (its goldens were "
        "recorded on them). Absent: calls none, or published before tritonbuild recorded it.",
    )


class PublishedModel(_Frozen):
    live: int | None = Field(
        description="The newest version config.pbtxt pins (the one Triton serves)."
    )
    serving: list[int] = Field(
        default_factory=list,
        description="Every version config.pbtxt pins, when the "
        "recipe's version_policy serves several.",
    )
    config_sha256: str
    versions: dict[int, PublishedVersion] = Field(description="Complete versions only.")


class TargetManifest(_Frozen):
    schema_version: int = SCHEMA_VERSION
    models: dict[str, PublishedModel] = Field(default_factory=dict)

    def numerics_env(self) -> dict[str, str]:
        """The variables of the live versions' portable numerics, for the server that serves the
        target (repository/manifest.numerics_env: versions asking different values refused)."""
        return numerics_env(
            SimpleNamespace(name=name, numerics=model.versions[model.live].numerics)
            for name, model in sorted(self.models.items())
            if model.live in model.versions
        )


class Action(_Frozen):
    model: str
    version: int | None
    action: Literal[
        "upload", "skip", "switch", "prune", "create", "unchanged", "notify", "abort", "clean"
    ]
    path: str = ""
    bytes: int = 0
    detail: str = ""


class PublishReceipt(_Frozen):
    schema_version: int = SCHEMA_VERSION
    target: str
    triton_url: str = Field(description="What to pass to tritonserver --model-repository.")
    manifest_digest: str
    verification: Literal["passed", "skipped"]
    dry_run: bool
    actions: list[Action]
    uploaded_bytes: int
    seconds: float
    notified: list[dict] = Field(default_factory=list)
