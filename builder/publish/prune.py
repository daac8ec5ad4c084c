"""What a publish prunes (--keep) and when: the complete versions older than the live one beyond
--keep, less those served when the publish starts (they wait for the next publish) and those of a
model switched within the grace (TRITONBUILD_PRUNE_GRACE_S), removed before any upload; and the
version directories an interrupted prune left."""

from __future__ import annotations

from tritonbuild.publish import objects
from tritonbuild.publish.models import Action, TargetManifest, utc_epoch, utc_iso
from tritonbuild.publish.target import Target
from tritonbuild.publish.timing import GRACE_ENV


def prune_actions(state: TargetManifest, keep: int | None) -> list[Action]:
    """The complete versions older than the live one beyond --keep (the served ones never), newest
    kept first. A version newer than the live one (published, not pinned: a specific policy) is not
    old: it stays."""
    if keep is None:
        return []
    out = []
    for name, published in state.models.items():
        live_v = published.live
        older = sorted(
            (
                v
                for v in published.versions
                if live_v is not None and v < live_v and v not in published.serving
            ),
            reverse=True,
        )
        for v in older[keep - 1 :]:
            out.append(
                Action(model=name, version=v, action="prune", detail=f"older than the {keep} kept")
            )
    return out


def deferred(
    prune: list[Action], before: TargetManifest, now: float, grace: float
) -> tuple[list[Action], list[Action]]:
    """(what is pruned now, what waits as 'defer' actions). Left out: the versions served when the
    publish starts and those not complete at the target then (this publish uploads them: a
    repository holding older versions); both go at a later publish. Triton loads a version from
    cloud storage by copying the whole model directory, old versions included, at its next poll
    after the switch (the fleet test: 'Failed to get object at .../doubler/2: NoSuchKey', a load
    failed by a prune right after the switch): so before this publish's switch nothing of its own
    is loading, and a model the previous publish (or a rollback) switched less than `grace`
    seconds ago keeps every version until a publish after that (servers may still be copying it),
    said in a 'defer' action."""
    held = {name: {*published.serving, published.live} for name, published in before.models.items()}
    there = {name: set(published.versions) for name, published in before.models.items()}
    return after_grace(
        [
            action
            for action in prune
            if action.version not in held.get(action.model, ())
            and action.version in there.get(action.model, ())  # complete at the start
        ],
        before,
        now,
        grace,
    )


def after_grace(
    actions: list[Action], before: TargetManifest, now: float, grace: float
) -> tuple[list[Action], list[Action]]:
    """(the removals that go now, the rest as 'defer' actions): none of a model switched less than
    `grace` seconds before `now` (before.switched_at), whose directory servers may still be
    copying."""
    now_pruned, waiting = [], []
    for action in actions:
        published = before.models.get(action.model)
        switched = utc_epoch(published.switched_at) if published is not None else None
        if switched is not None and now - switched < grace:
            detail = (
                f"kept until {utc_iso(switched + grace)}: {action.model}/ was switched "
                f"{max(0.0, now - switched):.0f} s ago, servers may still be copying it "
                f"({GRACE_ENV}={grace:g}); a publish after that prunes it"
            )
            waiting.append(action.model_copy(update={"action": "defer", "detail": detail}))
        else:
            now_pruned.append(action)
    return now_pruned, waiting


def without(state: TargetManifest, prune: list[Action]) -> TargetManifest:
    """state less the pruned versions."""
    gone = {(action.model, action.version) for action in prune}
    return TargetManifest(
        models={
            name: published.model_copy(
                update={
                    "versions": {
                        v: version
                        for v, version in published.versions.items()
                        if (name, v) not in gone
                    }
                }
            )
            for name, published in state.models.items()
        }
    )


def interrupted(target: Target, state: TargetManifest) -> list[Action]:
    """Version directories older than the live one that the manifest no longer lists: left by a
    prune that was interrupted between forgetting and deleting them."""
    from tritonbuild.repository.rules import VERSION_RE

    out = []
    for name, published in state.models.items():
        present = {
            int(v) for v in objects.subdirs(target, target.path(name)) if VERSION_RE.match(v)
        }
        for v in sorted(present - set(published.versions)):
            if published.live is not None and v < published.live:
                out.append(
                    Action(
                        model=name, version=v, action="prune", detail="left by an interrupted prune"
                    )
                )
    return out
