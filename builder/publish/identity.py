"""What a published version answers with, beyond its files (the manifest's model_identity): its
whole config.pbtxt (every parameter; the version_policy aside, which is publish's switch) and, for a
model that calls others (an ensemble's steps, a BLS's calls: depends_on), the same of each model it
calls as this repository serves it. Publish says "unchanged, already published, identical" only when
all of it is; a version whose config or steps changed is refused (bump its version), so the goldens
at the target always belong to what is served (issue 43: a step changed under an ensemble left the
ensemble's goldens stale, and the readiness probe failed on every pod)."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.core.hashing import sha256_bytes, sha256_json
from tritonbuild.errors import PublishError
from tritonbuild.publish.layout import read_stored_config, version_content
from tritonbuild.publish.models import PublishedModel, PublishedVersion, TargetManifest
from tritonbuild.publish.pinning import pinned_config
from tritonbuild.publish.target import Target
from tritonbuild.repository.manifest import Manifest, ManifestModel
from tritonbuild.triton.config import config_bytes


def own_config(root: Path, model: ManifestModel) -> bytes:
    """The version's own config (config-v<N>.pbtxt at the target): the repository's, pinned to it."""
    return pinned_config(config_bytes(root / model.name), [model.version])


NOT_HERE = (
    "not in this repository"  # a called model the publishing build did not hold: never compared
)


def _behaviour(root: Path, newest: dict[str, ManifestModel], name: str, seen: tuple) -> str:
    """sha256 over a model's files, its config (no version pinned) and the models it calls."""
    model = newest.get(name)
    if (
        model is None or name in seen
    ):  # NOTE: not in this repository (or a cycle, refused by Triton)
        return NOT_HERE
    return sha256_json(
        {
            "files": model.model_identity,
            "config": sha256_bytes(pinned_config(config_bytes(root / name), [])),
            "calls": _calls(root, newest, model, (*seen, name)),
        }
    )


def _calls(root: Path, newest: dict[str, ManifestModel], model: ManifestModel, seen: tuple):
    return {dep: _behaviour(root, newest, dep, seen) for dep in sorted(model.depends_on)}


def _newest(manifest: Manifest) -> dict[str, ManifestModel]:
    newest: dict[str, ManifestModel] = {}
    for each in manifest.models:
        if each.name not in newest or each.version > newest[each.name].version:
            newest[each.name] = each
    return newest


def steps_identity(root: Path, manifest: Manifest, model: ManifestModel) -> dict[str, str] | None:
    """Each model this one calls → its behaviour identity, as the repository serves it (its newest
    version: a step's model_version -1 is the newest the server has); None for a model that calls
    none."""
    if not model.depends_on:
        return None
    return _calls(root, _newest(manifest), model, (model.name,))


def refuse_stale_callers(root: Path, manifest: Manifest, target: Target, after: TargetManifest):
    """A model live at the target, not in this publish, that calls one this publish changes (an
    ensemble published from another build): its goldens were recorded on the published step, and it
    would answer otherwise under the same version. Refused, naming both."""
    newest = _newest(manifest)
    for name, published in sorted(after.models.items()):
        record = published.versions.get(published.live) if published.live else None
        if name in newest or record is None or not record.steps_identity:
            continue
        changed = sorted(
            dep
            for dep, identity in record.steps_identity.items()
            if dep in newest and _behaviour(root, newest, dep, (name,)) != identity
        )
        if changed:
            raise PublishError(
                f"{name} version {published.live} at the target calls {', '.join(changed)}, which "
                "this publish changes: its goldens were recorded on the published one, and it would "
                "answer otherwise under the same version; nothing at the target was changed",
                where=target.url,
                hint=f"publish {', '.join(changed)} together with {name} at a bumped version (one "
                f"build with both), or leave {', '.join(changed)} as published",
            )


def changed_steps(published: dict[str, str] | None, now: dict[str, str] | None) -> list[str]:
    """The models called whose identity differs from the published version's record (none when the
    record predates it)."""
    if published is None:
        return []
    now = now or {}
    return sorted(name for name in {*published, *now} if published.get(name) != now.get(name))


def config_differences(old: bytes, new: bytes) -> list[str]:
    """The config fields that differ (a parameter by its key), version_policy aside."""
    from tritonbuild.triton.config import parse

    a, b = parse(pinned_config(old, [])), parse(pinned_config(new, []))
    fields = {field.name for field, _ in (*a.ListFields(), *b.ListFields())}
    out = [
        f"parameters[{key!r}]"
        for key in sorted({*a.parameters, *b.parameters})
        if a.parameters.get(key) != b.parameters.get(key)
    ]
    return out + sorted(
        name for name in fields if name != "parameters" and getattr(a, name) != getattr(b, name)
    )


def same_as_published(
    target: Target, model: ManifestModel, done: PublishedVersion, files, own: bytes, steps
) -> None:
    """A version already at the target is published again only as it is there: its files, its whole
    config (parameters too) and the models it calls; anything else is refused, never published in
    place (the target's config-v<N>.pbtxt and goldens would belong to another model)."""
    why = None
    if changed := changed_steps(done.steps_identity, steps):
        why = f"other models under it ({', '.join(changed)} changed; its goldens were recorded on theirs)"
    elif done.model_identity != model.model_identity or version_content(
        done.files, model.version
    ) != version_content(files, model.version):
        why = "different content"
    elif (  # NOTE: none differ: the same config rendered otherwise (another protobuf's text format)
        done.config_sha256 is not None
        and done.config_sha256 != sha256_bytes(own)
        and (fields := _config_changes(target, model, own))
    ):
        why = f"another config.pbtxt ({fields})"
    if why is not None:
        raise PublishError(
            f"{model.name} version {model.version} is already published with {why}; a published "
            "version is never rewritten, and nothing at the target was changed",
            where=target.url,
            hint=f"bump 'version' in {model.recipe_path or model.name + '/config.pbtxt'}, rebuild, "
            "verify, publish",
        )


def _config_changes(target: Target, model: ManifestModel, own: bytes) -> str:
    """What differs between the version's config stored at the target and this one's ('' when the
    two are the same config)."""
    from tritonbuild.triton.config import ConfigParseError

    name, stored = read_stored_config(target, model.name, model.version)
    if stored is None:
        return f"its digest is not the one recorded, and {name} is missing at the target"
    try:
        fields = config_differences(stored, own)
    except ConfigParseError:
        return f"its digest is not the one recorded, and {name} at the target does not parse"
    return f"{', '.join(fields)} differ" if fields else ""


class TargetBehaviour:
    """The behaviour identity (as `_behaviour` computes it from a repository) of each model at a
    target, from the published records: a version's files identity, its stored config-v<N>.pbtxt
    and the models it calls, at the versions `live` names. None where a record cannot tell (a
    version published before tritonbuild stored its config)."""

    def __init__(self, target: Target, models: dict[str, PublishedModel]):
        self.target, self.models = target, models
        self._configs: dict[tuple[str, int], bytes | None] = {}

    def of(self, name: str, version: int, live: dict[str, int], seen: tuple = ()) -> str | None:
        published = self.models.get(name)
        record = published.versions.get(version) if published else None
        if record is None or name in seen or record.config_sha256 is None:
            return None
        key = (name, version)
        if key not in self._configs:
            self._configs[key] = read_stored_config(self.target, name, version)[1]
        if self._configs[key] is None:
            return None
        calls = {}
        for dep, recorded in sorted((record.steps_identity or {}).items()):
            now = recorded if recorded == NOT_HERE else None
            if now is None and dep in live:
                now = self.of(dep, live[dep], live, (*seen, name))
            if now is None:
                return None
            calls[dep] = now
        config = sha256_bytes(pinned_config(self._configs[key], []))
        return sha256_json({"files": record.model_identity, "config": config, "calls": calls})

    def stale(self, live: dict[str, int]) -> dict[str, list[str]]:
        """Each model serving at `live` whose record says it was verified on another version of
        a model it calls (its goldens would not answer for what is served) → those models."""
        out = {}
        for name, version in sorted(live.items()):
            record = self.models[name].versions.get(version)
            deps = sorted(
                dep
                for dep, recorded in ((record.steps_identity or {}) if record else {}).items()
                if recorded != NOT_HERE
                and dep in live
                and (now := self.of(dep, live[dep], live)) is not None
                and now != recorded
            )
            if deps:
                out[name] = deps
        return out


def refuse_shared_changes(steps, kept: TargetManifest, start: TargetManifest) -> None:
    """A file beside the version folders (a labels file, warmup data) is one file for every version:
    Triton reads it from the model directory (core model.cc: label_filename joined to the model
    directory; backend_model_instance.cc: warmup/<input_data_file>). A version this publish uploads
    whose copy differs from the one a version staying at the target was published with would
    overwrite it: that version's answers change under it (its labels), and verify TARGET and
    rollback find it damaged. Refused before anything is written, naming both versions (kept: the
    target manifest after this publish, the pruned versions gone; start: before it)."""
    for step in steps:
        published = kept.models.get(step.name)
        if published is None:
            continue
        before = start.models.get(step.name)
        live = before.live if before is not None else None
        for version in step.versions:
            if version.todo:  # uploaded now (a complete version is never rewritten)
                found = _other_copy(version.model.version, version.files, published)
                if found is not None:
                    raise _shared_change(step.name, *found, live)


def _other_copy(new: int, files: dict, published: PublishedModel) -> tuple[str, int, int] | None:
    """(path, new, old): the first file beside the version folders that version `new` carries with
    other content than version `old` at the target; None if none."""
    for rel, entry in sorted(files.items()):
        if rel.split("/", 1)[0].isdigit():
            continue  # inside a version folder: that version's own
        for old, record in sorted(published.versions.items()):
            theirs = record.files.get(rel)
            if old != new and theirs is not None and theirs.sha256 != entry.sha256:
                return rel, new, old
    return None


def _shared_change(model: str, rel: str, new: int, old: int, live: int | None) -> PublishError:
    role = "live" if old == live else "kept"
    hint = (
        "warmup data from the goldens is the first golden sample's inputs: keep them for "
        f"version {new}, or set the recipe's warmup.data to zero or random"
        if rel.startswith("warmup/")
        else f"give version {new}'s copy another name (a labels file: the recipe's labels entry, "
        "or the config's label_filename), rebuild, verify, publish"
    )
    return PublishError(
        f"{model}/{rel}: version {new} carries other content than version {old} ({role} at the "
        f"target) was published with, and Triton reads that file from the model directory for "
        f"every version: publishing would change version {old}'s answers under it and leave it "
        "damaged for verify and rollback",
        where=f"{model}/{rel}",
        hint=hint,
    )
