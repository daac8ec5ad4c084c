"""The publish protocol. Triton serves what config.pbtxt's version_policy pins; a single-object write of
config.pbtxt is the switch, and the target manifest, written last, is the commit record.

For each model, in order:
1. a new model first gets its config.pbtxt with an empty `specific {}` policy (Triton loads nothing);
2. the new version's objects are uploaded (only missing or different ones) and checked (listing, sizes);
3. config.pbtxt is rewritten pinning `specific { versions: [N] }`: the switch;
then the target manifest records the complete versions and which is live; pruning comes after it.
A published (complete) version is never rewritten; a version directory not in the target manifest is an
interrupted upload and is completed by the next run.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tritonbuild.core.cas import FileEntry
from tritonbuild.core.hashing import pretty_json, sha256_bytes, sha256_file
from tritonbuild.core.progress import SILENT, Reporter
from tritonbuild.errors import PublishError, UsageError
from tritonbuild.publish import objects
from tritonbuild.publish.gate import gate
from tritonbuild.publish.lock import TargetLock
from tritonbuild.publish.models import (
    TARGET_MANIFEST,
    Action,
    PublishedModel,
    PublishedVersion,
    PublishReceipt,
    TargetManifest,
)
from tritonbuild.publish.notify import notify_all
from tritonbuild.publish.target import Target, open_target
from tritonbuild.repository.config import parse, render
from tritonbuild.repository.manifest import MANIFEST_NAME, Manifest, ManifestModel, read_repository

JOBS = 8


def version_config_name(version: int) -> str:
    """Each version's own config, kept beside config.pbtxt (Triton reads only config.pbtxt and version
    directories; files in the model directory are ignored, like golden-v<N>.npz)."""
    return f"config-v{version}.pbtxt"


def pinned_config(config: bytes, live: list[int]) -> bytes:
    model_config = parse(config)
    model_config.ClearField("version_policy")
    model_config.version_policy.specific.versions.extend(live)
    if not live:
        model_config.version_policy.specific.SetInParent()
    return render(model_config)


def parse_remote(config: bytes, where: str):
    """A config.pbtxt read from a target: one that does not parse is a PublishError naming the object."""
    from google.protobuf import text_format

    try:
        return parse(config)
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise PublishError(f"{where} at the target is not a valid Triton model config: {e}", where=where,
                           hint="restore that object (publish the model again, or put back the file)") from None


def live_version(config: bytes | None, where: str = "config.pbtxt") -> int | None:
    if config is None:
        return None
    vp = parse_remote(config, where).version_policy
    versions = list(vp.specific.versions) if vp.WhichOneof("policy_choice") == "specific" else []
    return max(versions) if versions else None


def check_local_files(root: Path, manifest: Manifest) -> None:
    """Every file we may send, hashed again now: bytes changed since verify (a flipped bit in a weight, an
    edited model.py) stop the publish before anything is written, naming the file."""
    names = {model.name for model in manifest.models}
    missing = [f"{name}/config.pbtxt" for name in sorted(names) if f"{name}/config.pbtxt" not in manifest.files]
    if missing:
        raise PublishError(f"the manifest does not list {missing[0]}", where=str(root / MANIFEST_NAME),
                           hint=f"rebuild the repository, then 'tritonbuild verify {root}'")

    def one(item: tuple[str, FileEntry]) -> str | None:
        rel, entry = item
        path = root / rel
        try:
            if path.is_symlink() or not path.is_file():
                return f"{rel} is missing or not a regular file"
            if path.stat().st_size != entry.size:
                return f"{rel} has {path.stat().st_size} bytes, the manifest says {entry.size}"
            if sha256_file(path) != entry.sha256:
                return f"{rel} changed since the build: its sha256 differs from the manifest"
        except OSError as e:
            return f"{rel} cannot be read: {e.strerror}"
        return None

    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        problems = [problem for problem in pool.map(one, sorted(manifest.files.items())) if problem]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise PublishError(f"refusing to publish: {problems[0]}{more}", where=str(root / problems[0].split(" ")[0]),
                           hint=f"rebuild (tritonbuild build RECIPES -o {root}), verify, then publish; "
                                "nothing was written to the target")


def _version_files(manifest: Manifest, model: ManifestModel) -> dict[str, FileEntry]:
    """Model-directory relative path → entry, for the files that belong to version m.version."""
    prefix = f"{model.name}/{model.version}/"
    files = {k[len(model.name) + 1:]: v for k, v in manifest.files.items() if k.startswith(prefix)}
    if model.goldens:
        files[model.goldens[len(model.name) + 1:]] = manifest.files[model.goldens]
    return files


class _Publisher:
    def __init__(self, root: Path, manifest: Manifest, target: Target, verification: str, reporter: Reporter,
                 dry_run: bool):
        self.root, self.manifest, self.target = root, manifest, target
        self.verification, self.reporter, self.dry_run = verification, reporter, dry_run
        self.actions: list[Action] = []
        self.uploaded = 0
        self.lock: TargetLock | None = None

    def plan_uploads(self, model: ManifestModel, state: TargetManifest) -> tuple[dict[str, FileEntry], list[str]]:
        files = _version_files(self.manifest, model)
        published = state.models.get(model.name)
        if published and model.version in published.versions:
            done = published.versions[model.version]
            if done.model_identity != model.model_identity or done.files != files:
                raise PublishError(f"{model.name} version {model.version} is already published with different content; "
                                   "a published version is never rewritten", where=self.target.url,
                                   hint=f"bump 'version' in {model.recipe_path}, rebuild, verify, publish")
            self.actions.append(Action(model=model.name, version=model.version, action="unchanged",
                                       detail="already published, identical"))
            return files, []
        remote = objects.remote_sizes(self.target, self.target.path(model.name))
        todo = []
        for rel, entry in sorted(files.items()):
            size = remote.get(rel)
            same = size == entry.size and (self.dry_run or objects.remote_sha256(
                self.target, self.target.path(model.name, rel)) == entry.sha256)
            self.actions.append(Action(model=model.name, version=model.version, action="skip" if same else "upload",
                                       path=f"{model.name}/{rel}", bytes=entry.size,
                                       detail="present with the same sha256" if same else ""))
            if not same:
                todo.append(rel)
        return files, todo

    def upload_version(self, model: ManifestModel, files: dict[str, FileEntry], todo: list[str]) -> None:
        total = sum(files[rel].size for rel in todo)
        self.reporter.start_transfer(total, f"{model.name} v{model.version}")
        try:
            with ThreadPoolExecutor(max_workers=JOBS) as pool:
                futures = [pool.submit(objects.upload, self.target, self.root / model.name / rel,
                                       self.target.path(model.name, rel), self.reporter) for rel in todo]
                for future in futures:
                    future.result()
        finally:
            self.reporter.end_transfer()
        self.uploaded += total
        remote = objects.remote_sizes(self.target, self.target.path(model.name))
        bad = [rel for rel, e in files.items() if remote.get(rel) != e.size]
        if bad:
            raise PublishError(f"{model.name} v{model.version}: after upload, {bad[:3]} are missing or the wrong size",
                               where=self.target.url, hint="re-run publish: it resumes")


def _group(manifest: Manifest) -> dict[str, list[ManifestModel]]:
    out: dict[str, list[ManifestModel]] = {}
    for model in manifest.models:
        out.setdefault(model.name, []).append(model)
    return {k: sorted(v, key=lambda model: model.version) for k, v in sorted(out.items())}


def publish(root: Path, target_url: str, *, endpoint_url: str | None = None, skip_verify: bool = False,
            keep: int | None = None, notify: tuple[str, ...] = (), dry_run: bool = False, break_lock: bool = False,
            reporter: Reporter = SILENT, require_reproducible: bool = False) -> PublishReceipt:
    t0 = time.perf_counter()
    if keep is not None and keep < 1:
        raise UsageError(f"--keep must be >= 1, not {keep} (the live version is always kept)",
                         hint="use --keep 1 or more")
    manifest = read_repository(root, PublishError)
    verification = gate(root, manifest, skip_verify, require_reproducible)
    check_local_files(root, manifest)
    target = open_target(target_url, endpoint_url=endpoint_url)
    objects.check_reachable(target)
    publisher = _Publisher(root, manifest, target, verification, reporter, dry_run)
    if dry_run:
        state = objects.read_state(target)
        for name, versions in _group(manifest).items():
            for model in versions:
                publisher.plan_uploads(model, state)
            live = versions[-1].version
            current = objects.read_text(target, target.path(name, "config.pbtxt"))
            if pinned_config((root / name / "config.pbtxt").read_bytes(), [live]) != current:
                publisher.actions.append(Action(model=name, version=live, action="switch",
                                                detail=f"config.pbtxt would pin version {live}"))
        newest = {name: versions[-1].version for name, versions in _group(manifest).items()}
        publisher.actions.extend(_prune_actions(state, keep, newest))
        return _receipt(publisher, manifest, verification, t0, True, [])
    with TargetLock(target, break_lock=break_lock) as lock:
        publisher.lock = lock
        publisher.actions.extend(objects.clean_leftovers(target, lock.broken, reporter))
        state = objects.read_state(target)
        models = dict(state.models)
        for name, versions in _group(manifest).items():
            reporter.status(f"publishing {name}")
            models[name] = _publish_model(publisher, name, versions, state)
        state = TargetManifest(models=models)
        lock.check_held()
        objects.write_bytes(target, target.path(TARGET_MANIFEST), pretty_json(state.model_dump(mode="json")))
        if keep is not None:
            state = _prune(publisher, state, keep)
    # Only models whose config.pbtxt changed: an unchanged model needs no reload (and a load request for a
    # model the server cannot serve would flip it to not-ready).
    changed = {action.model for action in publisher.actions if action.action in ("create", "switch")}
    notified = notify_all(notify, changed, sorted(state.models))
    return _receipt(publisher, manifest, verification, t0, False, notified)


def _publish_model(publisher: _Publisher, name: str, versions: list[ManifestModel],
                   state: TargetManifest) -> PublishedModel:
    target = publisher.target
    config_path = target.path(name, "config.pbtxt")
    current = objects.read_text(target, config_path)
    published = state.models.get(name)
    complete = dict(published.versions) if published else {}
    local_config = (publisher.root / name / "config.pbtxt").read_bytes()
    if current is None:
        objects.write_bytes(target, config_path, pinned_config(local_config, []))
        publisher.actions.append(Action(model=name, version=None, action="create",
                                        detail="config.pbtxt pinning no version (Triton loads nothing yet)"))
    for model in versions:
        files, todo = publisher.plan_uploads(model, state)
        if todo:
            publisher.upload_version(model, files, todo)
        record = complete.get(model.version) or PublishedVersion(
            files=files, source_manifest=publisher.manifest.digest, verification=publisher.verification,
            model_identity=model.model_identity)
        if record.config_sha256 is None:
            # NOTE: stored before the switch, so a rollback to this version can restore its own interface.
            own = pinned_config(local_config, [model.version])
            objects.write_bytes(target, target.path(name, version_config_name(model.version)), own)
            record = record.model_copy(update={"config_sha256": sha256_bytes(own)})
        complete[model.version] = record
    serving = _serving(publisher, name, local_config, versions[-1].version, complete)
    live = serving[-1]
    new_config = pinned_config(local_config, serving)
    if new_config != current:
        if publisher.lock is not None:
            publisher.lock.check_held()
        objects.write_bytes(target, config_path, new_config)
        publisher.actions.append(Action(model=name, version=live, action="switch",
                                        detail=f"config.pbtxt now pins version{'s' if len(serving) > 1 else ''} "
                                               f"{', '.join(map(str, serving))}"))
    return PublishedModel(live=live, serving=serving if len(serving) > 1 else [],
                          config_sha256=sha256_bytes(new_config), versions=complete)


def _serving(publisher: _Publisher, name: str, local_config: bytes, newest: int, complete: dict) -> list[int]:
    """The versions config.pbtxt pins: the recipe's version_policy (latest N up to the version published,
    specific, all) over the COMPLETE versions at the target, so nothing half-written is ever named. Triton serves
    every pinned version under one config.pbtxt: their own configs (config-v<N>.pbtxt) must match."""
    vp = parse(local_config).version_policy
    kind = vp.WhichOneof("policy_choice")
    if kind == "specific":
        serving = sorted(set(vp.specific.versions))
        missing = [v for v in serving if v not in complete]
        if missing:
            raise PublishError(f"{name}: version_policy.specific names versions {missing}, which are not complete at "
                               f"the target (complete: {sorted(complete)})", where=publisher.target.url,
                               hint="publish those versions first (each from its build), or change the policy")
    elif kind == "all":
        serving = sorted(complete)
    else:
        n = vp.latest.num_versions if kind == "latest" else 1
        serving = sorted(v for v in complete if v <= newest)[-max(n, 1):]
    if len(serving) > 1:
        mine = pinned_config(local_config, [])
        for v in serving:
            own = objects.read_text(publisher.target, publisher.target.path(name, version_config_name(v))) \
                if complete[v].config_sha256 else None
            if own is None or pinned_config(own, []) != mine:
                why = "has no stored config" if own is None else "has another config (inputs, outputs or settings)"
                raise PublishError(f"{name}: version {v} {why}; Triton serves every version a version_policy names "
                                   f"under one config.pbtxt, so versions {serving} cannot be served side by side",
                                   where=publisher.target.url, hint="serve one version (latest 1), or republish the "
                                   "versions from builds with the same config")
    return serving


def _prune_actions(state: TargetManifest, keep: int | None, live: dict[str, int]) -> list[Action]:
    if keep is None:
        return []
    out = []
    for name, published in state.models.items():
        live_v = live.get(name, published.live)
        others = sorted((v for v in published.versions if v != live_v and v not in published.serving), reverse=True)
        for v in others[keep - 1:]:
            out.append(Action(model=name, version=v, action="prune", detail=f"older than the {keep} kept"))
    return out


def _orphans(publisher: _Publisher, state: TargetManifest) -> list[Action]:
    """Version directories older than the live one that the manifest no longer lists: left by a prune that
    was interrupted between forgetting and deleting them."""
    from tritonbuild.repository.rules import VERSION_RE

    out = []
    for name, published in state.models.items():
        present = {int(v) for v in objects.subdirs(publisher.target, publisher.target.path(name))
                   if VERSION_RE.match(v)}
        for v in sorted(present - set(published.versions)):
            if published.live is not None and v < published.live:
                out.append(Action(model=name, version=v, action="prune", detail="left by an interrupted prune"))
    return out


def _prune(publisher: _Publisher, state: TargetManifest, keep: int) -> TargetManifest:
    victims = _prune_actions(state, keep, {name: published.live for name, published in state.models.items()
                                           if published.live})
    for action in _orphans(publisher, state):
        objects.remove_tree(publisher.target, publisher.target.path(action.model, str(action.version)))
        objects.remove_tree(publisher.target, publisher.target.path(action.model, f"golden-v{action.version}.npz"))
        publisher.actions.append(action)
    if not victims:
        return state
    models = {name: published.model_copy(update={
                  "versions": {v: published_version for v, published_version in published.versions.items()
                               if not any(action.model == name and action.version == v for action in victims)}})
              for name, published in state.models.items()}
    new_state = TargetManifest(models=models)
    # NOTE: forget the versions first, then delete: a crash in between leaves only unreferenced objects.
    objects.write_bytes(publisher.target, publisher.target.path(TARGET_MANIFEST),
                        pretty_json(new_state.model_dump(mode="json")))
    for action in victims:
        files = state.models[action.model].versions[action.version].files
        objects.remove_tree(publisher.target, publisher.target.path(action.model, str(action.version)))
        for rel in [*files, version_config_name(action.version)]:
            if "/" not in rel:
                objects.remove_tree(publisher.target, publisher.target.path(action.model, rel))
        publisher.actions.append(action)
    return new_state


def _receipt(publisher: _Publisher, manifest: Manifest, verification: str, t0: float, dry_run: bool,
             notified: list[dict]) -> PublishReceipt:
    return PublishReceipt(target=publisher.target.url, triton_url=publisher.target.triton_url(),
                          manifest_digest=manifest.digest, verification=verification, dry_run=dry_run,
                          actions=publisher.actions, uploaded_bytes=publisher.uploaded,
                          seconds=round(time.perf_counter() - t0, 3), notified=notified)


def open_for_read(target_url: str, endpoint_url: str | None) -> Target:
    target = open_target(target_url, endpoint_url=endpoint_url)
    objects.check_reachable(target)
    return target
