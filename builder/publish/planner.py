"""The publish planner: what a publish does at a target, computed read-only from the repository and
the target's state. `publish --dry-run` prints the plan; the real publish computes it under the lock
and carries it out (protocol.py), so the two cannot disagree. Every refusal that depends only on the
repository and the target's state is raised here, before anything is written: a published version
with other content, a version_policy naming versions that are not complete, versions that cannot be
served side by side."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tritonbuild.core.cas import FileEntry
from tritonbuild.core.hashing import sha256_bytes
from tritonbuild.errors import PublishError
from tritonbuild.publish import objects
from tritonbuild.publish.identity import (
    own_config,
    refuse_shared_changes,
    refuse_stale_callers,
    same_as_published,
    steps_identity,
)
from tritonbuild.publish.layout import read_stored_config, side_places, version_files
from tritonbuild.publish.models import Action, PublishedModel, PublishedVersion, TargetManifest
from tritonbuild.publish.pinning import pinned_config, version_config_name
from tritonbuild.publish.prune import after_grace, deferred, interrupted, prune_actions, without
from tritonbuild.publish.target import Target
from tritonbuild.publish.timing import GRACE_S
from tritonbuild.repository.manifest import Manifest, ManifestModel
from tritonbuild.triton.config import config_bytes, parse

JOBS = 8


@dataclass(frozen=True)
class VersionStep:
    """One version of one model: the files to upload, its own config to store, the record it
    becomes."""

    model: ManifestModel
    files: dict[str, FileEntry]  # model-directory relative path → entry
    todo: list[str]  # the files missing at the target or different there
    own_config: bytes | None  # config-v<N>.pbtxt to store (None: stored by an earlier publish)
    record: PublishedVersion
    actions: list[Action]
    own_config_path: str = ""  # where own_config goes, model-directory relative (layout.py)


@dataclass(frozen=True)
class ModelStep:
    """One model: a placeholder config for a new model, its versions, then the switch."""

    name: str
    placeholder: (
        bytes | None
    )  # config.pbtxt pinning nothing, written first (a model new at the target)
    versions: list[VersionStep]
    config: bytes | None  # the new config.pbtxt (None: unchanged)
    published: PublishedModel
    create: list[Action] = field(default_factory=list)
    switch: list[Action] = field(default_factory=list)


@dataclass(frozen=True)
class PublishPlan:
    models: list[ModelStep]
    state: TargetManifest  # the target manifest after the switches (the pruned versions gone)
    orphans: list[Action]  # version directories an interrupted prune left (removed)
    prune: list[Action]  # versions beyond --keep (forgotten, then removed), before any upload
    start: TargetManifest  # the target manifest when the publish starts
    waiting: list[Action] = field(default_factory=list)  # prunes deferred by the grace ('defer')

    @property
    def actions(self) -> list[Action]:
        """Every action, in the order the publish takes them: the prune, every model's version
        folders, then the switches (protocol.py)."""
        out = self.orphans + self.prune + self.waiting
        for step in self.models:
            out += step.create + [action for version in step.versions for action in version.actions]
        return out + [action for step in self.models for action in step.switch]

    @property
    def upload_bytes(self) -> int:
        return sum(
            version.files[rel].size
            for step in self.models
            for version in step.versions
            for rel in version.todo
        )


def group(manifest: Manifest) -> dict[str, list[ManifestModel]]:
    """Model name → its versions in the repository, oldest first."""
    out: dict[str, list[ManifestModel]] = {}
    for model in manifest.models:
        out.setdefault(model.name, []).append(model)
    return {k: sorted(v, key=lambda model: model.version) for k, v in sorted(out.items())}


def plan_publish(
    root: Path,
    manifest: Manifest,
    target: Target,
    state: TargetManifest,
    *,
    verification: str,
    keep: int | None,
    grace: float = GRACE_S,
) -> PublishPlan:
    """What publishing root's repository onto target (whose manifest is `state`) does, without
    writing; grace: seconds after a model's switch during which none of its versions is pruned."""
    models = dict(state.models)
    steps = []
    for name, versions in group(manifest).items():
        step = _plan_model(root, manifest, target, state, name, versions, verification)
        steps.append(step)
        models[name] = step.published
    after = TargetManifest(models=models)
    refuse_stale_callers(root, manifest, target, after)
    now = time.time()
    orphans, left = after_grace(
        interrupted(target, after) if keep is not None else [], state, now, grace
    )
    prune, waiting = deferred(prune_actions(after, keep), state, now, grace)
    refuse_shared_changes(steps, without(after, prune), state)
    return PublishPlan(
        models=steps,
        state=without(after, prune),
        orphans=orphans,
        prune=prune,
        start=state,
        waiting=left + waiting,
    )


def _plan_model(
    root: Path,
    manifest: Manifest,
    target: Target,
    state: TargetManifest,
    name: str,
    versions: list[ManifestModel],
    verification: str,
) -> ModelStep:
    current = objects.read_text(target, target.path(name, "config.pbtxt"))
    published = state.models.get(name)
    complete = dict(published.versions) if published else {}
    local_config = config_bytes(root / name)
    version_steps = []
    for model in versions:
        version = _plan_version(
            root, manifest, target, model, complete.get(model.version), verification
        )
        version_steps.append(version)
        complete[model.version] = version.record
    own = {
        version.model.version: version.own_config for version in version_steps if version.own_config
    }
    serving = _serving(target, name, local_config, versions[-1].version, complete, own)
    new_config = pinned_config(local_config, serving)
    create, switch = _config_actions(name, current, new_config, serving)
    return ModelStep(
        name=name,
        placeholder=None if current is not None else pinned_config(local_config, []),
        versions=version_steps,
        config=new_config if switch else None,
        published=PublishedModel(
            live=serving[-1],
            serving=serving if len(serving) > 1 else [],
            config_sha256=sha256_bytes(new_config),
            versions=complete,
            # a switch's time is stamped as it happens (protocol.py); none: the last one's stays
            switched_at=None if switch or published is None else published.switched_at,
        ),
        create=create,
        switch=switch,
    )


def _config_actions(
    name: str, current: bytes | None, new_config: bytes, serving: list[int]
) -> tuple[list[Action], list[Action]]:
    """(create, switch): a config.pbtxt pinning no version where the model has none yet, and the
    write of the one pinning the served versions where it differs from the target's."""
    create = (
        []
        if current is not None
        else [
            Action(
                model=name,
                version=None,
                action="create",
                detail="config.pbtxt pinning no version (Triton loads nothing yet)",
            )
        ]
    )
    pinned = f"version{'s' if len(serving) > 1 else ''} {', '.join(map(str, serving))}"
    switch = (
        []
        if new_config == current
        else [
            Action(
                model=name,
                version=serving[-1],
                action="switch",
                detail=f"config.pbtxt pins {pinned}",
            )
        ]
    )
    return create, switch


def _plan_version(
    root: Path,
    manifest: Manifest,
    target: Target,
    model: ManifestModel,
    done: PublishedVersion | None,
    verification: str,
) -> VersionStep:
    files = version_files(manifest, model)
    own = own_config(root, model)
    steps = steps_identity(root, manifest, model)
    if done is not None:
        same_as_published(target, model, done, files, own, steps)
        actions = [
            Action(
                model=model.name,
                version=model.version,
                action="unchanged",
                detail="already published, identical",
            )
        ]
        todo: list[str] = []
    else:
        actions, todo = _file_actions(target, model, files)
    record = done or PublishedVersion(
        files=files,
        source_manifest=manifest.digest,
        verification=verification,
        model_identity=model.model_identity,
        numerics=model.numerics,
        steps_identity=steps,
    )
    if record.config_sha256 is None:
        # NOTE: stored before the switch, so a rollback to this version can restore its own
        # interface: inside a version folder written now, beside a complete one (never rewritten)
        record = record.model_copy(update={"config_sha256": sha256_bytes(own)})
    else:
        own = None
    inside, beside = side_places(model.version, version_config_name(model.version))
    return VersionStep(
        model=model,
        files=files,
        todo=todo,
        own_config=own,
        record=record,
        actions=actions,
        own_config_path=inside if done is None else beside,
    )


def _file_actions(
    target: Target, model: ManifestModel, files: dict[str, FileEntry]
) -> tuple[list[Action], list]:
    """upload or skip for each file of an incomplete version: skipped only when the object at the
    target has the same size and sha256 (an interrupted upload is completed, never trusted)."""
    remote = objects.remote_sizes(target, target.path(model.name))

    def same(item: tuple[str, FileEntry]) -> bool:
        rel, entry = item
        return (
            remote.get(rel) == entry.size
            and objects.remote_sha256(target, target.path(model.name, rel)) == entry.sha256
        )

    items = sorted(files.items())
    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        present = list(pool.map(same, items))
    actions = [
        Action(
            model=model.name,
            version=model.version,
            action="skip" if ok else "upload",
            path=f"{model.name}/{rel}",
            bytes=entry.size,
            detail="present with the same sha256" if ok else "",
        )
        for (rel, entry), ok in zip(items, present, strict=True)
    ]
    return actions, [rel for (rel, _entry), ok in zip(items, present, strict=True) if not ok]


def _serving(
    target: Target,
    name: str,
    local_config: bytes,
    newest: int,
    complete: dict[int, PublishedVersion],
    own: dict[int, bytes],
) -> list[int]:
    """The versions config.pbtxt pins: the recipe's version_policy (latest N up to the version
    published, specific, all) over the versions complete at the target once this publish's are, so
    nothing half-written is ever named. Triton serves every pinned version under one config.pbtxt:
    their own configs (config-v<N>.pbtxt, stored or about to be: `own`) must match."""
    vp = parse(local_config).version_policy
    kind = vp.WhichOneof("policy_choice")
    if kind == "specific":
        serving = sorted(set(vp.specific.versions))
        missing = [v for v in serving if v not in complete]
        if missing:
            raise PublishError(
                f"{name}: version_policy.specific names versions {missing}, which are not complete "
                f"at the target (complete: {sorted(complete)})",
                where=target.url,
                hint="publish those versions first (each from its build), or change the policy",
            )
    elif kind == "all":
        serving = sorted(complete)
    else:
        n = vp.latest.num_versions if kind == "latest" else 1
        serving = sorted(v for v in complete if v <= newest)[-max(n, 1) :]
    if len(serving) > 1:
        mine = pinned_config(local_config, [])
        for v in serving:
            config = own.get(v) or (
                read_stored_config(target, name, v)[1] if complete[v].config_sha256 else None
            )
            if config is None or pinned_config(config, []) != mine:
                why = (
                    "has no stored config"
                    if config is None
                    else "has another config (inputs, outputs or settings)"
                )
                raise PublishError(
                    f"{name}: version {v} {why}; Triton serves every version a version_policy "
                    f"names under one config.pbtxt, so versions {serving} cannot be served side "
                    "by side",
                    where=target.url,
                    hint="serve one version (latest 1), or republish the "
                    "versions from builds with the same config; nothing was written to the target",
                )
    return serving
