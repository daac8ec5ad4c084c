"""The publish protocol. Triton serves what config.pbtxt's version_policy pins; a single-object
write of config.pbtxt is the switch, and the target manifest, written last, is the commit record.

For each model, in order:
1. a new model first gets its config.pbtxt with an empty `specific {}` policy (Triton loads
   nothing);
2. the new version's objects are uploaded (only missing or different ones) and checked (listing,
   sizes);
3. config.pbtxt is rewritten pinning `specific { versions: [N] }`: the switch; then the target
   manifest records the complete versions and which is live; pruning comes after it. A published
   (complete) version is never rewritten; a version directory not in the target manifest is an
   interrupted upload and is completed by the next run.

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
from tritonbuild.publish.layout import in_version_dir
from tritonbuild.publish.lock import TargetLock
from tritonbuild.publish.models import TARGET_MANIFEST, Action, PublishReceipt, TargetManifest
from tritonbuild.publish.notify import notify_all
from tritonbuild.publish.pinning import version_config_name
from tritonbuild.publish.planner import ModelStep, PublishPlan, plan_publish
from tritonbuild.publish.target import Target, open_target
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

    def __init__(self, root: Path, target: Target, lock: TargetLock, reporter: Reporter):
        self.root, self.target, self.lock, self.reporter = root, target, lock, reporter
        self.actions: list[Action] = []
        self.uploaded = 0

    def model(self, step: ModelStep) -> None:
        """The version folders first; the files beside them (a version's goldens and stored config)
        last, just before the switch: Triton counts a model directory's files other than
        config.pbtxt and the version folders as part of every version (core's
        ModelTimestamp::IsModelVersionModified; facts/kubernetes.json poll_side_files under
        tests/contracts), so a poll between their upload and the switch
        reloads the live version. Uploaded first, they opened that window for the whole upload.
        Left open: a poll whose timestamps are read before the last of them lands and whose config
        is read after the switch loads the new version, and the next poll reloads it (seen in the
        fleet test, 1 run in 7); files inside the version folder would close both."""
        target = self.target
        config_path = target.path(step.name, "config.pbtxt")
        if step.placeholder is not None:
            objects.write_bytes(target, config_path, step.placeholder)
            self.actions += step.create
        folders = [
            in_version_dir(version.files, version.model.version) for version in step.versions
        ]
        for version, folder in zip(step.versions, folders, strict=True):
            inside = [rel for rel in version.todo if rel in folder]
            if inside:
                self.upload_version(version.model, version.files, inside, check=inside)
            self.actions += version.actions
        for version, folder in zip(step.versions, folders, strict=True):
            beside = [rel for rel in version.todo if rel not in folder]
            if beside:
                self.upload_version(version.model, version.files, beside, check=list(version.files))
            if version.own_config is not None:
                objects.write_bytes(
                    target,
                    target.path(step.name, version_config_name(version.model.version)),
                    version.own_config,
                )
        if step.config is not None:
            self.lock.check_held()
            objects.write_bytes(target, config_path, step.config)
            self.actions += step.switch

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
                        self.root / model.name / rel,
                        self.target.path(model.name, rel),
                        self.reporter,
                    )
                    for rel in todo
                ]
                for future in futures:
                    future.result()
        finally:
            self.reporter.end_transfer()
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

    def prune(self, plan: PublishPlan) -> TargetManifest:
        """Orphans removed; then the versions beyond --keep forgotten (the manifest written), then
        removed: a crash in between leaves only unreferenced objects."""
        target, state = self.target, plan.state
        for action in plan.orphans:
            objects.remove_tree(target, target.path(action.model, str(action.version)))
            objects.remove_tree(target, target.path(action.model, f"golden-v{action.version}.npz"))
            self.actions.append(action)
        if not plan.prune:
            return state
        victims = {(action.model, action.version) for action in plan.prune}
        models = {
            name: published.model_copy(
                update={
                    "versions": {
                        v: published_version
                        for v, published_version in published.versions.items()
                        if (name, v) not in victims
                    }
                }
            )
            for name, published in state.models.items()
        }
        pruned = TargetManifest(models=models)
        objects.write_bytes(
            target, target.path(TARGET_MANIFEST), pretty_json(pruned.model_dump(mode="json"))
        )
        for action in plan.prune:
            files = state.models[action.model].versions[action.version].files
            shared = {
                rel for kept in models[action.model].versions.values() for rel in kept.files
            }  # e.g. labels
            objects.remove_tree(target, target.path(action.model, str(action.version)))
            for rel in [*files, version_config_name(action.version)]:
                if "/" not in rel and rel not in shared:
                    objects.remove_tree(target, target.path(action.model, rel))
            self.actions.append(action)
        return pruned


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
    manifest = read_repository(root, PublishError)
    verification = gate(root, manifest, skip_verify, require_reproducible)
    check_local_files(root, manifest)
    target = open_target(where, endpoint_url=endpoint_url)
    objects.check_reachable(target)
    if dry_run:
        plan = plan_publish(
            root, manifest, target, objects.read_state(target), verification=verification, keep=keep
        )
        return _receipt(target, manifest, verification, t0, plan.actions, 0, dry_run=True)
    with TargetLock(target, break_lock=break_lock) as lock:
        publisher = _Publisher(root, target, lock, reporter)
        publisher.actions += objects.clean_leftovers(target, lock.broken, reporter)
        plan = plan_publish(
            root, manifest, target, objects.read_state(target), verification=verification, keep=keep
        )
        for step in plan.models:
            reporter.status(f"publishing {step.name}")
            publisher.model(step)
        lock.check_held()
        objects.write_bytes(
            target, target.path(TARGET_MANIFEST), pretty_json(plan.state.model_dump(mode="json"))
        )
        state = publisher.prune(plan)
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
