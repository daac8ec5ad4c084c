"""`tritonbuild rollback`: make a complete published version live again, with the config it was
verified with."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from tritonbuild.core.hashing import pretty_json, sha256_bytes
from tritonbuild.core.location import Location
from tritonbuild.core.results import OMIT_NONE, Result
from tritonbuild.errors import PublishError
from tritonbuild.publish import objects
from tritonbuild.publish.identity import TargetBehaviour
from tritonbuild.publish.layout import read_stored_config
from tritonbuild.publish.lock import TargetLock
from tritonbuild.publish.models import (
    TARGET_MANIFEST,
    PublishedModel,
    PublishedVersion,
    TargetManifest,
    utc_iso,
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
class RolledBack(Result):
    """One more model switched in the same rollback (--also)."""

    model: str
    live: int
    previous: int | None
    config_restored: str
    interface_changed: bool


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
    also: list[RolledBack] | None = field(
        default=None, metadata=OMIT_NONE
    )  # the models switched with it (--also), each as the fields above
    lock_broken: str | None = field(
        default=None, metadata=OMIT_NONE
    )  # what breaking an expired lock said


def rollback(
    where: Location | str,
    model: str,
    to: int,
    *,
    also: dict[str, int] | None = None,
    endpoint_url: str | None = None,
    break_lock: bool = False,
    notify: tuple[str, ...] = (),
) -> RollbackResult:
    """Make a complete, published version live again with ITS config (the one it was verified with,
    stored at publish as config-v<N>.pbtxt), and the versions `also` names with it: each model's
    config.pbtxt, then the manifest; then notify servers. Refused, before anything is written, where
    a model that calls others (an ensemble, a BLS) would then serve beside another version of a
    model it calls than the one its goldens were recorded on."""
    switches = {model: to, **(also or {})}
    target = open_for_read(where, endpoint_url)
    with TargetLock(target, break_lock=break_lock) as lock:
        state = objects.read_state(target)
        current, own, restored = {}, {}, {}
        for name, version in switches.items():
            published = _intact_version(target, state, name, version)
            current[name] = _current_config(target, name)
            restored[name], own[name] = _stored_config(
                target, name, version, published.versions[version], current[name]
            )
        _refuse_stale_callers(target, state, switches)
        models = dict(state.models)
        for name, version in switches.items():
            objects.write_bytes(target, target.path(name, "config.pbtxt"), own[name])
            models[name] = models[name].model_copy(
                update={
                    "live": version,
                    "config_sha256": sha256_bytes(own[name]),
                    "switched_at": utc_iso(time.time()),
                }
            )
        objects.write_bytes(
            target,
            target.path(TARGET_MANIFEST),
            pretty_json(TargetManifest(models=models).model_dump(mode="json")),
        )
    notified = notify_all(notify, set(switches), [])
    first, *others = (
        RolledBack(
            model=name,
            live=version,
            previous=live_version(current[name]),
            config_restored=restored[name],
            interface_changed=own[name] != pinned_config(current[name], [version]),
        )
        for name, version in switches.items()
    )
    return RollbackResult(
        **asdict(first),
        target=target.url,
        notified=notified,
        also=others or None,
        lock_broken=lock.broken or None,
    )


def _current_config(target: Target, model: str) -> bytes:
    current = objects.read_text(target, target.path(model, "config.pbtxt"))
    if current is None:
        raise PublishError(
            f"{model}/config.pbtxt is missing at the target",
            where=target.url,
            hint="publish the model again",
        )
    parse_remote(current, f"{target.url}/{model}/config.pbtxt")
    return current


def _refuse_stale_callers(target: Target, state: TargetManifest, switches: dict[str, int]) -> None:
    """A PublishError where the switch leaves a model serving beside another version of a model it
    calls than its goldens were recorded on (issue 43: its readiness probe would fail on every pod),
    naming the versions to roll back together; staleness already at the target is not the switch's."""
    behaviour = TargetBehaviour(target, state.models)
    live = {
        name: published.live
        for name, published in state.models.items()
        if published.live is not None
    }
    after = {**live, **switches}
    before = behaviour.stale(live)
    new = {
        caller: fresh
        for caller, deps in behaviour.stale(after).items()
        if (fresh := [dep for dep in deps if dep not in before.get(caller, [])])
    }
    if not new:
        return
    pairs = "; ".join(
        f"{caller} version {after[caller]} calls {', '.join(f'{d} (would serve version {after[d]})' for d in deps)}"
        for caller, deps in sorted(new.items())
    )
    fixes = _together(behaviour, after, new, set(switches))
    first, *_ = switches.items()
    command = f"tritonbuild rollback {target.url} {first[0]} --to {first[1]}"
    extra = " ".join(
        f"--also {n}={v}" for n, v in {**dict(list(switches.items())[1:]), **fixes}.items()
    )
    raise PublishError(
        f"rolling back would leave models serving with goldens recorded on other versions of "
        f"the models they call: {pairs}; nothing at the target was changed",
        where=target.url,
        hint=f"roll them back together: {command} {extra}"
        if fixes
        else "publish the calling models at a bumped version built with the versions you roll "
        "back to, or roll back to versions published together",
    )


def _together(
    behaviour: TargetBehaviour, after: dict[str, int], stale: dict[str, list[str]], asked: set[str]
):
    """Versions that, switched too, leave none of `stale` stale: for each caller, its newest version
    whose record matches what would serve; else for each model it calls, its newest that matches
    the caller; never another version of a model the user asked for. {} where none exists."""
    fixes: dict[str, int] = {}
    for caller, deps in sorted(stale.items()):
        options = [{caller: v} for v in sorted(behaviour.models[caller].versions, reverse=True)]
        options += [
            {dep: v} for dep in deps for v in sorted(behaviour.models[dep].versions, reverse=True)
        ]
        for option in options:
            if asked & set(option):
                continue
            if caller not in behaviour.stale({**after, **fixes, **option}):
                fixes.update(option)
                break
        else:
            return {}
    return fixes


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
) -> tuple[str, bytes]:
    """(its path at the target, the config version `to` was verified with: config-v<N>.pbtxt in
    its version folder, or beside it where an earlier tritonbuild published it, layout.py), checked
    against its recorded digest and parsed; a PublishError where it is missing or changed."""
    if published_version.config_sha256:
        rel, own = read_stored_config(target, model, to)
    else:  # NOTE: a publish of that version again stores it beside its (complete) folder
        rel, own = version_config_name(to), None
    own_name = f"{model}/{rel}"
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
    return own_name, own
