"""`tritonbuild rollback`: make a complete published version live again, with the config it was
verified with."""

from __future__ import annotations

from dataclasses import dataclass, field

from tritonbuild.core.hashing import pretty_json, sha256_bytes
from tritonbuild.core.location import Location
from tritonbuild.core.results import OMIT_NONE, Result
from tritonbuild.errors import PublishError
from tritonbuild.publish import objects
from tritonbuild.publish.lock import TargetLock
from tritonbuild.publish.models import (
    TARGET_MANIFEST,
    PublishedModel,
    PublishedVersion,
    TargetManifest,
)
from tritonbuild.publish.notify import notify_all
from tritonbuild.publish.pinning import (
    live_version,
    parse_remote,
    pinned_config,
    version_config_name,
)
from tritonbuild.publish.protocol import open_for_read
from tritonbuild.publish.target import Target


@dataclass(frozen=True)
class RollbackResult(Result):
    """rollback: the version made live, the one it replaced, the config restored, the servers
    told."""

    target: str
    model: str
    live: int
    previous: int | None
    config_restored: str
    interface_changed: bool
    notified: list[dict]  # one row per server and model (publish/notify.py)
    lock_broken: str | None = field(
        default=None, metadata=OMIT_NONE
    )  # what breaking an expired lock said


def rollback(
    where: Location | str,
    model: str,
    to: int,
    *,
    endpoint_url: str | None = None,
    break_lock: bool = False,
    notify: tuple[str, ...] = (),
) -> RollbackResult:
    """Make a complete, published version live again with ITS config (the one it was verified with,
    stored at publish as config-v<N>.pbtxt): one config.pbtxt write, then the manifest; then notify
    servers."""
    target = open_for_read(where, endpoint_url)
    with TargetLock(target, break_lock=break_lock) as lock:
        state = objects.read_state(target)
        published = _intact_version(target, state, model, to)
        config_path = target.path(model, "config.pbtxt")
        current = objects.read_text(target, config_path)
        if current is None:
            raise PublishError(
                f"{model}/config.pbtxt is missing at the target",
                where=target.url,
                hint="publish the model again",
            )
        parse_remote(current, f"{target.url}/{model}/config.pbtxt")
        own_name = f"{model}/{version_config_name(to)}"
        own = _stored_config(target, model, to, published.versions[to], current)
        objects.write_bytes(target, config_path, own)
        models = dict(state.models)
        models[model] = published.model_copy(
            update={"live": to, "config_sha256": sha256_bytes(own)}
        )
        objects.write_bytes(
            target,
            target.path(TARGET_MANIFEST),
            pretty_json(TargetManifest(models=models).model_dump(mode="json")),
        )
    notified = notify_all(notify, {model}, [])
    return RollbackResult(
        target=target.url,
        model=model,
        live=to,
        previous=live_version(current),
        config_restored=own_name,
        interface_changed=own != pinned_config(current, [to]),
        notified=notified,
        lock_broken=lock.broken or None,
    )


def _intact_version(target: Target, state: TargetManifest, model: str, to: int) -> PublishedModel:
    """The model's publish record, when version `to` is a complete published version whose files are
    all at the target with their recorded sizes; a PublishError naming what is not."""
    published = state.models.get(model)
    if published is None:
        raise PublishError(
            f"model {model!r} is not published at this target",
            where=target.url,
            hint="see 'tritonbuild ls TARGET'",
        )
    if to not in published.versions:
        raise PublishError(
            f"{model} version {to} is not a complete published version (complete: "
            f"{sorted(published.versions)})",
            where=target.url,
            hint="pick one of those versions",
        )
    remote = objects.remote_sizes(target, target.path(model))
    missing = [rel for rel, e in published.versions[to].files.items() if remote.get(rel) != e.size]
    if missing:
        raise PublishError(
            f"{model} version {to} is damaged at the target: {missing[:3]} missing or resized",
            where=target.url,
            hint="publish that version again from its build",
        )
    return published


def _stored_config(
    target: Target, model: str, to: int, published_version: PublishedVersion, current: bytes
) -> bytes:
    """The config version `to` was verified with (config-v<N>.pbtxt beside the model), checked
    against its recorded digest and parsed; a PublishError where it is missing or changed."""
    own_name = f"{model}/{version_config_name(to)}"
    own = (
        objects.read_text(target, target.path(model, version_config_name(to)))
        if published_version.config_sha256
        else None
    )
    if own is None:
        raise PublishError(
            f"{model} version {to} has no stored config at the target ({own_name}; published "
            "before tritonbuild kept each version's config): re-pinning the current config "
            f"would serve version {to} under version {live_version(current)}'s interface",
            where=target.url,
            hint=f"publish version {to} again from its build (its files are "
            "not re-sent), then roll back",
        )
    if sha256_bytes(own) != published_version.config_sha256:
        raise PublishError(
            f"{own_name} at the target differs from the one recorded at publish",
            where=target.url,
            hint=f"publish version {to} again from its build",
        )
    parse_remote(own, f"{target.url}/{own_name}")
    return own
