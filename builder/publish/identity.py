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
from tritonbuild.publish.pinning import pinned_config
from tritonbuild.repository.manifest import Manifest, ManifestModel
from tritonbuild.triton.config import config_bytes


def own_config(root: Path, model: ManifestModel) -> bytes:
    """The version's own config (config-v<N>.pbtxt at the target): the repository's, pinned to it."""
    return pinned_config(config_bytes(root / model.name), [model.version])


def _behaviour(root: Path, newest: dict[str, ManifestModel], name: str, seen: tuple) -> str:
    """sha256 over a model's files, its config (no version pinned) and the models it calls."""
    model = newest.get(name)
    if (
        model is None or name in seen
    ):  # NOTE: not in this repository (or a cycle, refused by Triton)
        return "not in this repository"
    return sha256_json(
        {
            "files": model.model_identity,
            "config": sha256_bytes(pinned_config(config_bytes(root / name), [])),
            "calls": _calls(root, newest, model, (*seen, name)),
        }
    )


def _calls(root: Path, newest: dict[str, ManifestModel], model: ManifestModel, seen: tuple):
    return {dep: _behaviour(root, newest, dep, seen) for dep in sorted(model.depends_on)}


def steps_identity(root: Path, manifest: Manifest, model: ManifestModel) -> dict[str, str] | None:
    """Each model this one calls → its behaviour identity, as the repository serves it (its newest
    version: a step's model_version -1 is the newest the server has); None for a model that calls
    none."""
    if not model.depends_on:
        return None
    newest: dict[str, ManifestModel] = {}
    for each in manifest.models:
        if each.name not in newest or each.version > newest[each.name].version:
            newest[each.name] = each
    return _calls(root, newest, model, (model.name,))


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
