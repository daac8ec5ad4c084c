"""What lives at a publish target besides the models, and what a publish did."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tritonbuild.core.cas import FileEntry
from tritonbuild.core.omit import OmitWhenNone
from tritonbuild.repository.manifest import numerics_env

SCHEMA_VERSION = 1
TARGET_MANIFEST = "tritonbuild-manifest.json"  # at the target root: the commit marker, written last
LOCK_NAME = "tritonbuild.lock"  # at the target root (Triton ignores root files; a folder would be a "model")


def utc_iso(timestamp: float) -> str:
    """A time as the target's documents write it (the lock's lease, a model's switch)."""
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_epoch(text: str | None) -> float | None:
    """utc_iso's text back to epoch seconds; None for anything else."""
    try:
        return (
            datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ")
            .replace(tzinfo=timezone.utc)
            .timestamp()
        )
    except ValueError:
        return None


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


class PublishedModel(_Frozen, OmitWhenNone):
    # NOTE: absent in manifests written before it: their bytes are kept
    omit_when_none = ("switched_at",)

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
    switched_at: str | None = Field(
        None,
        description="When config.pbtxt last changed which versions are served (a publish's switch, "
        "a rollback), UTC, the publisher's clock: polling servers copy the whole model directory "
        "after it, so --keep prunes none of its versions for TRITONBUILD_PRUNE_GRACE_S. Absent: "
        "switched before tritonbuild recorded it.",
    )


class TargetManifest(_Frozen):
    schema_version: int = SCHEMA_VERSION
    models: dict[str, PublishedModel] = Field(default_factory=dict)

    def switched(self, names: set[str], when: str) -> TargetManifest:
        """This manifest with the models named stamped switched_at `when` (their config.pbtxt just
        changed which versions are served)."""
        return self.model_copy(
            update={
                "models": {
                    name: model.model_copy(update={"switched_at": when}) if name in names else model
                    for name, model in self.models.items()
                }
            }
        )

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
        "upload",
        "skip",
        "switch",
        "prune",
        "defer",
        "create",
        "unchanged",
        "notify",
        "abort",
        "clean",
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
