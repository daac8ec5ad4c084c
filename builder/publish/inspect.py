"""Read-only views of a target: what is published, what is live, and whether the objects are
intact."""

from __future__ import annotations

from dataclasses import dataclass

from tritonbuild.core.hashing import sha256_bytes
from tritonbuild.core.location import Location
from tritonbuild.core.results import Result
from tritonbuild.publish import objects
from tritonbuild.publish.layout import read_stored_config
from tritonbuild.publish.lock import read_lock
from tritonbuild.publish.models import PublishedModel, TargetManifest
from tritonbuild.publish.pinning import live_version, pinned_config
from tritonbuild.publish.protocol import open_for_read
from tritonbuild.publish.target import Target
from tritonbuild.repository.rules import VERSION_RE


def list_target(where: Location | str, *, endpoint_url: str | None = None) -> TargetListing:
    """Models, versions present, complete and live, and anything an interrupted publish left
    behind."""
    return list_opened(open_for_read(where, endpoint_url))


def list_opened(target: Target) -> TargetListing:
    """list_target of a target already opened (and reached) by the caller."""
    state = objects.read_state(target)
    models = [
        _listed_model(target, state, name)
        for name in sorted(set(_model_dirs(target)) | set(state.models))
    ]
    manifest_bytes = objects.read_text(target, target.path("tritonbuild-manifest.json"))
    lock = read_lock(target)
    if lock is not None:
        lock = {k: lock.get(k) for k in ("holder", "host", "pid", "since", "expires_at", "state")}
    return TargetListing(
        target=target.url,
        triton_url=target.triton_url(),
        manifest_sha256=sha256_bytes(manifest_bytes) if manifest_bytes else None,
        models=models,
        lock=lock,
    )


def _model_dirs(target: Target) -> list[str]:
    """The names of the directories at the target's root (none where the root does not exist
    yet)."""
    try:
        entries = (
            target.fs.ls(target.root, detail=True, refresh=True)
            if target.fs.exists(target.root)
            else []
        )
    except FileNotFoundError:
        entries = []
    return sorted(
        e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory"
    )


def _listed_model(target: Target, state: TargetManifest, name: str) -> TargetModel:
    """One model as ls shows it: the live version its config pins, what is served, complete and
    present."""
    present = sorted(
        int(v) for v in objects.subdirs(target, target.path(name)) if VERSION_RE.match(v)
    )
    config = objects.read_text(target, target.path(name, "config.pbtxt"))
    published = state.models.get(name)
    complete = sorted(published.versions) if published else []
    live = live_version(config, f"{target.url}/{name}/config.pbtxt")
    serving = (
        published.serving
        if published and published.serving
        else ([live] if live is not None else [])
    )
    live_record = (
        published.versions[published.live]
        if published and published.live in published.versions
        else None
    )
    return TargetModel(
        name=name,
        live=live,
        serving=serving,
        complete=complete,
        present=present,
        notes=_notes(config, published, present, complete, live),
        published_from=live_record.source_manifest if live_record is not None else None,
        verification=live_record.verification if live_record is not None else None,
        switched_at=published.switched_at if published is not None else None,
    )


def _notes(
    config: bytes | None,
    published: PublishedModel | None,
    present: list[int],
    complete: list[int],
    live: int | None,
) -> list[str]:
    """What is off with a model at the target: a config the last publish did not record, versions an
    interrupted upload or prune left, a pinned version that is missing."""
    notes = []
    if published and config is not None and sha256_bytes(config) != published.config_sha256:
        notes.append(
            "config.pbtxt differs from the last recorded publish (interrupted after the switch? "
            "re-run publish)"
        )
    incomplete = [v for v in present if v not in complete]
    orphans = [v for v in incomplete if live is not None and v < live]
    uploads = [v for v in incomplete if v not in orphans]
    if uploads:
        notes.append(
            f"incomplete versions {uploads} (an interrupted upload; not served; the next publish "
            "of that version completes it)"
        )
    if orphans:
        notes.append(
            f"versions {orphans} left by an interrupted prune (not served; the next publish "
            "--keep removes them)"
        )
    if live is not None and live not in complete and live not in present:
        notes.append(f"config.pbtxt pins version {live}, which is not present")
    return notes


@dataclass(frozen=True)
class TargetCheck(Result):
    """verify TARGET: every object the target manifest names checked (present, size, sha256,
    configs)."""

    target: str
    objects_checked: int
    problems: list[str]
    passed: bool


@dataclass(frozen=True)
class TargetModel(Result):
    """One model at a target, as `ls` shows it."""

    name: str
    live: int | None
    serving: list[int]
    complete: list[int]
    present: list[int]
    notes: list[str]
    published_from: str | None
    verification: str | None
    # the last switch (a publish's, a rollback's), UTC; None: not recorded
    switched_at: str | None = None


@dataclass(frozen=True)
class TargetListing(Result):
    """ls TARGET: its models, the manifest's digest and the publish lock, if held."""

    target: str
    triton_url: str
    manifest_sha256: str | None
    models: list[TargetModel]
    lock: dict | None


def verify_target(where: Location | str, *, endpoint_url: str | None = None) -> TargetCheck:
    """Every object the target manifest names: present, right size, right sha256; configs as
    recorded."""
    target = open_for_read(where, endpoint_url)
    state = objects.read_state(target)
    problems, checked = [], 0
    if not state.models:
        problems.append("no tritonbuild target manifest here (nothing published?)")
    for name, published in sorted(state.models.items()):
        config = objects.read_text(target, target.path(name, "config.pbtxt"))
        if config is None:
            problems.append(f"{name}/config.pbtxt is missing")
        elif sha256_bytes(config) != published.config_sha256:
            problems.append(f"{name}/config.pbtxt differs from the recorded one")
        live = published.versions.get(published.live) if published.live is not None else None
        if config is not None and live is not None and live.config_sha256 is not None:
            checked += 1
            stored_at, own = read_stored_config(target, name, published.live)
            if (
                own is None
                or sha256_bytes(own) != live.config_sha256
                or pinned_config(own, []) != pinned_config(config, [])
            ):
                problems.append(
                    f"{name}/config.pbtxt is not the config version {published.live} was verified "
                    f"with ({name}/{stored_at}): Triton serves version "
                    f"{published.live} under another config (run 'tritonbuild rollback TARGET "
                    "MODEL --to N' to restore it)"
                )
        for _version, published_version in sorted(published.versions.items()):
            remote = objects.remote_sizes(target, target.path(name))
            for rel, entry in sorted(published_version.files.items()):
                checked += 1
                if rel not in remote:
                    problems.append(f"{name}/{rel} is missing")
                elif remote[rel] != entry.size:
                    problems.append(f"{name}/{rel} has size {remote[rel]}, expected {entry.size}")
                elif objects.remote_sha256(target, target.path(name, rel)) != entry.sha256:
                    problems.append(f"{name}/{rel} sha256 differs from the manifest")
    return TargetCheck(
        target=target.url, objects_checked=checked, problems=problems, passed=not problems
    )
