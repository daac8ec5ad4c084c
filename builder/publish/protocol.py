"""The publish protocol. Triton serves what config.pbtxt's version_policy pins; a single-object
write of config.pbtxt is the switch, and the target manifest, written last, is the commit record.

In order:
1. each new model first gets its config.pbtxt with an empty `specific {}` policy (Triton loads
   nothing);
2. each model's new version folders are written complete: the version's stored config, its objects
   (only missing or different ones) and its goldens, all inside the folder (layout.py), checked
   (listing, sizes); nothing is written beside the version folders but what changed there (label
   files, warmup data) and the stored config of a version published before;
3. once nothing has been written for TRITONBUILD_SWITCH_SETTLE_S (settle), each config.pbtxt is
   rewritten pinning `specific { versions: [N] }`: the switch; then the target manifest records the
   complete versions and which is live; pruning comes after it. A published (complete) version is
   never rewritten; a version directory not in the target manifest is an interrupted upload and is
   completed by the next run.

Triton's poller counts a version folder for that version only and every other entry of the model
directory (not config.pbtxt) for every version (facts/kubernetes.json poll_side_files). So a publish
never marks a live version modified, and the race where a poll read the timestamps before the last
file beside the folders landed and the config after the switch (the new version loaded, then loaded
again in full: the fleet test, 1 run in 7) is closed: no such file is written, and the same straddle
over the version folder's own last file needs a poll whose pass over one model directory outlasts
the settle.

What is done is decided first, read-only, by planner.plan_publish (under the lock); this module
carries the plan out, and `--dry-run` returns the same plan's actions without the lock or a write.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tritonbuild.core.cas import FileEntry
from tritonbuild.core.hashing import file_hashes, pretty_json
from tritonbuild.core.location import Location
from tritonbuild.core.progress import SILENT, Reporter
from tritonbuild.errors import PublishError, UsageError
from tritonbuild.publish import objects
from tritonbuild.publish.gate import gate
from tritonbuild.publish.layout import in_version_dir, side_names, side_places, source_rel
from tritonbuild.publish.lock import TargetLock
from tritonbuild.publish.models import (
    TARGET_MANIFEST,
    Action,
    PublishReceipt,
    TargetManifest,
    utc_iso,
)
from tritonbuild.publish.notify import notify_all
from tritonbuild.publish.planner import ModelStep, PublishPlan, VersionStep, plan_publish
from tritonbuild.publish.prune import without
from tritonbuild.publish.target import Target, open_target
from tritonbuild.publish.timing import grace_seconds, settle_seconds
from tritonbuild.repository.manifest import MANIFEST_NAME, Manifest, ManifestModel, read_repository

JOBS = 8


def check_local_files(root: Path, manifest: Manifest) -> None:
    """Every file we may send, checked again now: bytes changed since verify (a flipped bit in a
    weight, an edited model.py) stop the publish before anything is written, naming the file.
    Through the stat-keyed file-hash cache (core/hashing.py: size, mtime, inode and ctime, which any
    write moves and no user call sets back): a file untouched since it was last hashed is not read
    again, so publishing an unchanged multi-GB repository costs a stat per file."""
    from tritonbuild.core.cachedir import default_cache_dir

    hashes = file_hashes(default_cache_dir())  # the build cache's, where build and plan keep theirs
    names = {model.name for model in manifest.models}
    missing = [
        f"{name}/config.pbtxt"
        for name in sorted(names)
        if f"{name}/config.pbtxt" not in manifest.files
    ]
    if missing:
        raise PublishError(
            f"the manifest does not list {missing[0]}",
            where=str(root / MANIFEST_NAME),
            hint=f"rebuild the repository, then 'tritonbuild verify {root}'",
        )

    def one(item: tuple[str, FileEntry]) -> str | None:
        rel, entry = item
        path = root / rel
        try:
            if path.is_symlink() or not path.is_file():
                return f"{rel} is missing or not a regular file"
            if path.stat().st_size != entry.size:
                return f"{rel} has {path.stat().st_size} bytes, the manifest says {entry.size}"
            if hashes.sha256(path) != entry.sha256:
                return f"{rel} changed since the build: its sha256 differs from the manifest"
        except OSError as e:
            return f"{rel} cannot be read: {e.strerror}"
        return None

    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        problems = [problem for problem in pool.map(one, sorted(manifest.files.items())) if problem]
    hashes.save()
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise PublishError(
            f"refusing to publish: {problems[0]}{more}",
            where=str(root / problems[0].split(" ")[0]),
            hint=f"rebuild (tritonbuild build RECIPES -o {root}), verify, then publish; "
            "nothing was written to the target",
        )


class _Publisher:
    """Carries out a PublishPlan under the lock, recording each action as it is done."""

    def __init__(
        self, root: Path, target: Target, lock: TargetLock, reporter: Reporter, settle_s: float
    ):
        self.root, self.target, self.lock, self.reporter = root, target, lock, reporter
        self.settle_s = settle_s
        self.actions: list[Action] = []
        self.uploaded = 0
        self.written_at: float | None = None  # time.monotonic() of the last write into a model

    def versions(self, step: ModelStep) -> None:
        """A model's new versions, each folder complete before anything else: its stored config,
        its files and goldens (inside it: layout.py), checked at the target; then what lies beside
        the version folders, only where it changed (label files, warmup data), and the stored
        config of a version published before (never written into its complete folder). A new model
        first gets its config.pbtxt pinning nothing."""
        target = self.target
        if step.placeholder is not None:
            objects.write_bytes(target, target.path(step.name, "config.pbtxt"), step.placeholder)
            self.actions += step.create
        split = []
        for version in step.versions:
            folder = in_version_dir(version.files, version.model.version)
            inside = [rel for rel in version.todo if rel in folder]
            split.append((version, [rel for rel in version.todo if rel not in folder]))
            if version.own_config is not None and version.own_config_path.startswith(
                f"{version.model.version}/"
            ):
                self.write_own_config(step.name, version)
            if inside:
                self.upload_version(version.model, version.files, inside, check=inside)
            self.actions += version.actions
        for version, beside in split:
            if beside:
                self.upload_version(version.model, version.files, beside, check=list(version.files))
            if version.own_config is not None and "/" not in version.own_config_path:
                self.write_own_config(step.name, version)

    def carry_out(self, plan: PublishPlan) -> TargetManifest:
        """The plan, in order: the prune (before any upload), every model's version folders, the
        settle, the switches, then the target manifest (each switched model's switched_at stamped):
        the commit record. Returns that manifest."""
        self.prune(plan)
        self.actions += plan.waiting
        for step in plan.models:
            self.reporter.status(f"publishing {step.name}")
            self.versions(step)
        self.settle()
        for step in plan.models:
            self.switch(step)
        switched = {step.name for step in plan.models if step.config is not None}
        state = plan.state.switched(switched, utc_iso(time.time()))
        self.lock.check_held()
        objects.write_bytes(
            self.target,
            self.target.path(TARGET_MANIFEST),
            pretty_json(state.model_dump(mode="json")),
        )
        return state

    def write_own_config(self, name: str, version: VersionStep) -> None:
        objects.write_bytes(
            self.target, self.target.path(name, version.own_config_path), version.own_config
        )
        self.written_at = time.monotonic()

    def switch(self, step: ModelStep) -> None:
        """config.pbtxt rewritten pinning the versions served: the switch (after settle)."""
        if step.config is not None:
            self.lock.check_held()
            objects.write_bytes(
                self.target, self.target.path(step.name, "config.pbtxt"), step.config
            )
            self.actions += step.switch

    def settle(self) -> None:
        """Waits until settle_s have passed since the last write into a model directory. A poll reads
        a model's timestamps (its version folders' first) and then its config.pbtxt: one that read
        a version folder before its last file landed and the config after the switch loads that
        version with a stale timestamp, and the next poll loads it again in full
        (facts/kubernetes.json poll_side_files). Every new version folder is written before the
        first switch, so this wait is paid once per publish; a poll whose pass over one model
        directory takes longer than it can still do that."""
        if self.written_at is not None:
            time.sleep(max(0.0, self.written_at + self.settle_s - time.monotonic()))

    def upload_version(
        self, model: ManifestModel, files: dict[str, FileEntry], todo: list[str], check: list[str]
    ) -> None:
        """todo uploaded, then the files named in check listed at the target with their sizes."""
        total = sum(files[rel].size for rel in todo)
        self.reporter.start_transfer(total, f"{model.name} v{model.version}")
        try:
            with ThreadPoolExecutor(max_workers=JOBS) as pool:
                futures = [
                    pool.submit(
                        objects.upload,
                        self.target,
                        self.root / model.name / source_rel(model, rel),
                        self.target.path(model.name, rel),
                        self.reporter,
                    )
                    for rel in todo
                ]
                for future in futures:
                    future.result()
        finally:
            self.reporter.end_transfer()
            self.written_at = time.monotonic()
        self.uploaded += total
        remote = objects.remote_sizes(self.target, self.target.path(model.name))
        bad = [rel for rel in check if remote.get(rel) != files[rel].size]
        if bad:
            raise PublishError(
                f"{model.name} v{model.version}: after upload, {bad[:3]} are missing or the wrong "
                "size",
                where=self.target.url,
                hint="re-run publish: it resumes",
            )

    def prune(self, plan: PublishPlan) -> None:
        """Before any upload: orphans removed; then the versions beyond --keep forgotten (the
        manifest as it was, less them, written), then removed: a crash in between leaves only
        unreferenced objects. Nothing served is among them (planner.deferred), and nothing is
        loading: no config.pbtxt has changed yet."""
        target, before = self.target, without(plan.start, plan.prune)
        for action in plan.orphans:
            kept = plan.state.models[action.model].versions.values()
            self.remove_version(action.model, action.version, {}, kept)
            self.actions.append(action)
        if not plan.prune:
            return
        self.lock.check_held()
        objects.write_bytes(
            target, target.path(TARGET_MANIFEST), pretty_json(before.model_dump(mode="json"))
        )
        for action in plan.prune:
            files = plan.start.models[action.model].versions[action.version].files
            # what the versions kept, the ones this publish adds included, carry stays (e.g. labels)
            kept = plan.state.models[action.model].versions.values()
            self.remove_version(action.model, action.version, files, kept)
            self.actions.append(action)

    def remove_version(self, model: str, version: int, files, kept) -> None:
        """A version's folder (its own side files in it), then what of it lies beside the folders:
        its side files where an earlier tritonbuild put them (layout.py), and the files beside
        config.pbtxt it carried that no kept version carries too (e.g. labels)."""
        target = self.target
        objects.remove_tree(target, target.path(model, str(version)))
        shared = {rel for published_version in kept for rel in published_version.files}
        beside = {rel for rel in files if "/" not in rel}
        beside |= {side_places(version, name)[1] for name in side_names(version)}
        for rel in sorted(beside - shared):
            objects.remove_tree(target, target.path(model, rel))


def publish(
    root: Path,
    where: Location | str,
    *,
    endpoint_url: str | None = None,
    skip_verify: bool = False,
    keep: int | None = None,
    notify: tuple[str, ...] = (),
    dry_run: bool = False,
    break_lock: bool = False,
    reporter: Reporter = SILENT,
    require_reproducible: bool = False,
) -> PublishReceipt:
    t0 = time.perf_counter()
    if keep is not None and keep < 1:
        raise UsageError(
            f"--keep must be >= 1, not {keep} (the live version is always kept)",
            hint="use --keep 1 or more",
        )
    settle_s, grace = settle_seconds(), grace_seconds()
    manifest = read_repository(root, PublishError)
    verification = gate(root, manifest, skip_verify, require_reproducible)
    check_local_files(root, manifest)
    target = open_target(where, endpoint_url=endpoint_url)
    objects.check_reachable(target)

    def plan() -> PublishPlan:
        state = objects.read_state(target)
        return plan_publish(
            root, manifest, target, state, verification=verification, keep=keep, grace=grace
        )

    if dry_run:
        return _receipt(target, manifest, verification, t0, plan().actions, 0, dry_run=True)
    with TargetLock(target, break_lock=break_lock) as lock:
        publisher = _Publisher(root, target, lock, reporter, settle_s)
        publisher.actions += objects.clean_leftovers(target, lock.broken, reporter)
        state = publisher.carry_out(plan())
    # Only models whose config.pbtxt changed: an unchanged model needs no reload (and a load request
    # for a model the server cannot serve would flip it to not-ready).
    changed = {
        action.model for action in publisher.actions if action.action in ("create", "switch")
    }
    notified = notify_all(notify, changed, sorted(state.models))
    return _receipt(
        target, manifest, verification, t0, publisher.actions, publisher.uploaded, notified=notified
    )


def _receipt(
    target: Target,
    manifest: Manifest,
    verification: str,
    t0: float,
    actions: list[Action],
    uploaded: int,
    *,
    dry_run: bool = False,
    notified: list[dict] | None = None,
) -> PublishReceipt:
    return PublishReceipt(
        target=target.url,
        triton_url=target.triton_url(),
        manifest_digest=manifest.digest,
        verification=verification,
        dry_run=dry_run,
        actions=actions,
        uploaded_bytes=uploaded,
        seconds=round(time.perf_counter() - t0, 3),
        notified=notified or [],
    )


def open_for_read(where: Location | str, endpoint_url: str | None = None) -> Target:
    target = open_target(where, endpoint_url=endpoint_url)
    objects.check_reachable(target)
    return target
