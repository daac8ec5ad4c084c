"""The publish planner: `publish --dry-run` says what the real publish then does, action for action, over the
version-policy matrix (latest 1, latest N, all, specific) with --keep; and what the target's state refuses is
refused before anything is written, by the dry run too."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import PY_MODEL, PY_RECIPE
from tritonbuild.publish.pinning import parse_remote


def _fake_verified(out: Path) -> None:
    """A passing report for out's manifest (the gate only reads it; verify is not what is tested here)."""
    from tritonbuild.core.hashing import pretty_json
    from tritonbuild.repository.manifest import REPORT_NAME, read_manifest
    from tritonbuild.verify.models import VerificationReport

    report = VerificationReport(
        manifest_digest=read_manifest(out).digest, toolchain={}, static=[], models=[], passed=True
    ).signed()  # with the test's own machine key
    (out / REPORT_NAME).write_bytes(pretty_json(report.model_dump(mode="json")))


@pytest.fixture
def build(cli, tmp_path):
    """build(versions, policy, factor=...) → a verified OUT holding those versions of model 'doubler'."""

    def _build(
        versions: tuple[int, ...], policy: str | None, factor: int = 2, tensor: str = "X"
    ) -> Path:
        src = tmp_path / f"src-{'-'.join(map(str, versions))}-{factor}-{tensor}"
        src.mkdir()
        (src / "model.py").write_text(
            PY_MODEL.replace("x * 2", f"x * {factor}").replace('"X"', f'"{tensor}"')
        )
        recipes = []
        for v in versions:
            text = (
                PY_RECIPE.replace("version: 1", f"version: {v}")
                .replace("name: X", f"name: {tensor}")
                .lstrip()
            )
            recipes.append(src / f"r{v}.yaml")
            recipes[-1].write_text(text + (f"version_policy: {policy}\n" if policy else ""))
        out = src / "out"
        result = cli("build", *recipes, "-o", out)
        assert result.exit_code == 0, result.stderr
        _fake_verified(out)
        return out

    return _build


def _actions(result) -> list[tuple]:
    assert result.exit_code == 0, result.stderr
    return [
        (a["model"], a["version"], a["action"], a["path"], a["bytes"], a["detail"])
        for a in json.loads(result.stdout)["actions"]
    ]


def _pinned(pub: Path) -> list[int]:
    return sorted(
        parse_remote(
            (pub / "doubler" / "config.pbtxt").read_bytes(), "config.pbtxt"
        ).version_policy.specific.versions
    )


# (version_policy, the versions each successive OUT holds, the versions config.pbtxt pins after each publish)
MATRIX = [
    (None, [(1,), (2,), (3,)], [[1], [2], [3]]),
    ("{latest: 2}", [(1,), (2,), (3,)], [[1], [1, 2], [2, 3]]),
    ("{all: true}", [(1,), (2,), (3,)], [[1], [1, 2], [1, 2, 3]]),
    (
        "{specific: [1, 2]}",
        [(1, 2), (1, 2, 3)],
        [[1, 2], [1, 2]],
    ),  # one model.py: 1 and 2 stay identical
]


@pytest.mark.parametrize(
    ("policy", "outs", "pins"), MATRIX, ids=["latest-1", "latest-2", "all", "specific"]
)
def test_dry_run_and_real_run_take_the_same_actions(cli, build, tmp_path, policy, outs, pins):
    target, pub = f"file://{tmp_path}/pub", tmp_path / "pub"
    for i, (versions, pinned) in enumerate(zip(outs, pins, strict=True)):
        out = build(versions, policy, factor=2 if len(versions) > 1 else i + 2)
        before = (
            sorted(p.relative_to(pub).as_posix() for p in pub.rglob("*")) if pub.exists() else []
        )
        dry = _actions(cli("publish", out, target, "--keep", "1", "--dry-run", "--json"))
        assert (
            sorted(p.relative_to(pub).as_posix() for p in pub.rglob("*")) if pub.exists() else []
        ) == before
        real = _actions(cli("publish", out, target, "--keep", "1", "--json"))
        assert dry == real, f"publish {i + 1} ({versions}, version_policy {policy})"
        assert _pinned(pub) == pinned
        switches = [detail for _m, _v, action, _p, _b, detail in real if action == "switch"]
        if switches:  # the switch says what config.pbtxt now pins
            assert switches == [
                f"config.pbtxt pins version{'s' if len(pinned) > 1 else ''} "
                f"{', '.join(map(str, pinned))}"
            ]
        pruned = {v for _m, v, action, *_ in real if action == "prune"}
        assert not any((pub / "doubler" / str(v)).exists() for v in pruned)
        assert all((pub / "doubler" / str(v)).is_dir() for v in pinned)
    # the next publish prunes what was live when the last one started (planner.deferred), then
    # nothing is left to do
    again = _actions(cli("publish", out, target, "--keep", "1", "--dry-run", "--json"))
    assert again == _actions(cli("publish", out, target, "--keep", "1", "--json"))
    assert {action for _m, _v, action, *_ in again} <= {"unchanged", "prune"}, again
    settled = _actions(cli("publish", out, target, "--keep", "1", "--json"))
    assert {action for _m, _v, action, *_ in settled} == {"unchanged"}, settled


def test_keep_never_prunes_a_version_newer_than_the_live_one(cli, build, tmp_path):
    """specific [1, 2] serves 1 and 2; version 3, published beside them, is not old: --keep 1 keeps it (it was
    uploaded and pruned in the same run, and again by every later publish)."""
    target, pub = f"file://{tmp_path}/pub", tmp_path / "pub"
    assert cli("publish", build((1, 2), "{specific: [1, 2]}"), target).exit_code == 0
    first = _actions(
        cli("publish", build((1, 2, 3), "{specific: [1, 2]}"), target, "--keep", "1", "--json")
    )
    assert ("doubler", 3, "upload") in {(m, v, action) for m, v, action, *_ in first}
    assert not any(action == "prune" for _m, _v, action, *_ in first)
    assert (pub / "doubler" / "3").is_dir() and _pinned(pub) == [1, 2]


def test_versions_that_cannot_be_served_side_by_side_are_refused_before_any_upload(
    cli, build, tmp_path
):
    target, pub = f"file://{tmp_path}/pub", tmp_path / "pub"
    for v in (1, 2):
        assert cli("publish", build((v,), "{latest: 2}", factor=v + 1), target).exit_code == 0
    other_interface = build((3,), "{latest: 2}", tensor="A")
    before = {p.relative_to(pub).as_posix(): p.read_bytes() for p in pub.rglob("*") if p.is_file()}
    for dry in (["--dry-run"], []):
        result = cli("publish", other_interface, target, *dry)
        assert result.exit_code == 7 and "cannot be served side by side" in result.stderr, (
            result.stderr
        )
        assert "nothing was written to the target" in result.stderr
        # NOTE: the lock is taken and released by the real run: compare everything else
        after = {
            p.relative_to(pub).as_posix(): p.read_bytes() for p in pub.rglob("*") if p.is_file()
        }
        assert after == before
    assert not (pub / "doubler" / "3").exists() and _pinned(pub) == [1, 2]


def test_keep_prunes_no_version_of_a_model_switched_within_the_grace(
    cli, build, tmp_path, monkeypatch
):
    """A publish seconds after another (or after a rollback) pruned the version before the one it had just made
    live, while polling servers were still copying that model's whole directory to load it: their loads failed
    on the deleted folder (the fleet test's NoSuchKey, with a publish right after the switch). Now each model's
    switch time is in the target manifest and --keep leaves every version of a model switched less than
    TRITONBUILD_PRUNE_GRACE_S (default 600) ago, saying so in a 'defer' action; a publish after it prunes."""
    from tritonbuild.publish.models import TargetManifest, utc_epoch
    from tritonbuild.publish.timing import GRACE_S

    monkeypatch.delenv("TRITONBUILD_PRUNE_GRACE_S")  # the default
    target, pub = f"file://{tmp_path}/pub", tmp_path / "pub"
    outs = {v: build((v,), None, factor=v + 1) for v in (1, 2, 3)}
    for v in (1, 2, 3):
        actions = _actions(cli("publish", outs[v], target, "--keep", "1", "--json"))
    state = TargetManifest.model_validate_json((pub / "tritonbuild-manifest.json").read_bytes())
    switched = utc_epoch(state.models["doubler"].switched_at)
    assert switched is not None and abs(switched - time.time()) < 60
    listed = json.loads(cli("ls", target, "--json").stdout)["models"][0]
    assert (
        listed["switched_at"] == state.models["doubler"].switched_at
    )  # ls says when, for an audit
    assert state.models["doubler"].switched_at in cli("ls", target).stdout
    # v1 is beyond --keep 1 and not served when the third publish started, but doubler was switched to v2 just
    # before: kept, and said so
    assert [(v, action) for _m, v, action, *_ in actions if action in ("prune", "defer")] == [
        (1, "defer")
    ]
    detail = next(d for _m, v, action, _p, _b, d in actions if action == "defer")
    assert (
        "TRITONBUILD_PRUNE_GRACE_S=600" in detail and "servers may still be copying it" in detail
    ), detail
    assert (pub / "doubler" / "1").is_dir() and GRACE_S == 600
    # the dry run says the same; once the grace has passed, the next publish prunes 1 and 2
    dry = _actions(cli("publish", outs[3], target, "--keep", "1", "--dry-run", "--json"))
    assert [(v, a) for _m, v, a, *_ in dry if a in ("prune", "defer")] == [
        (2, "defer"),
        (1, "defer"),
    ]
    monkeypatch.setenv("TRITONBUILD_PRUNE_GRACE_S", "0")
    later = _actions(cli("publish", outs[3], target, "--keep", "1", "--json"))
    assert sorted(v for _m, v, a, *_ in later if a == "prune") == [1, 2]
    assert not (pub / "doubler" / "1").exists() and not (pub / "doubler" / "2").exists()


def test_a_rollback_starts_the_grace_too(cli, build, tmp_path, monkeypatch):
    from tritonbuild import api

    target, pub = f"file://{tmp_path}/pub", tmp_path / "pub"
    for v in (1, 2):
        _actions(cli("publish", build((v,), None, factor=v + 1), target, "--json"))
    monkeypatch.setenv("TRITONBUILD_PRUNE_GRACE_S", "600")
    api.rollback(target, "doubler", 1)
    # live 1 (just rolled back to), 2 and 3 newer: publishing 3 with --keep 1 would prune 2 (not served at the
    # start, older than 3) -- but the rollback's switch is seconds old: the servers are loading 1 from it
    actions = _actions(cli("publish", build((3,), None, factor=4), target, "--keep", "1", "--json"))
    assert [(v, a) for _m, v, a, *_ in actions if a in ("prune", "defer")] == [(2, "defer")]
    assert (pub / "doubler" / "2").is_dir()


def test_a_folder_an_interrupted_prune_left_waits_for_the_grace_too(
    cli, build, tmp_path, monkeypatch
):
    """A version folder the manifest no longer lists (a prune killed between forgetting and deleting it) is
    removed by the next --keep publish; within the grace after the model's switch it is as much in the servers'
    copy of the directory as a listed one, so it waits too."""
    target, pub = f"file://{tmp_path}/pub", tmp_path / "pub"
    outs = {v: build((v,), None, factor=v + 1) for v in (1, 2, 3)}
    for v in (1, 2):
        _actions(cli("publish", outs[v], target, "--json"))
    manifest = pub / "tritonbuild-manifest.json"
    doc = json.loads(manifest.read_text())
    del doc["models"]["doubler"]["versions"][
        "1"
    ]  # forgotten, not deleted: what a killed prune leaves
    manifest.write_text(json.dumps(doc))
    monkeypatch.setenv("TRITONBUILD_PRUNE_GRACE_S", "600")
    actions = _actions(cli("publish", outs[3], target, "--keep", "2", "--json"))
    assert [(v, a) for _m, v, a, *_ in actions if a in ("prune", "defer")] == [(1, "defer")]
    assert (pub / "doubler" / "1").is_dir()
    monkeypatch.setenv("TRITONBUILD_PRUNE_GRACE_S", "0")
    actions = _actions(cli("publish", outs[3], target, "--keep", "2", "--json"))
    assert [(v, a) for _m, v, a, *_ in actions if a in ("prune", "defer")] == [(1, "prune")]
    assert not (pub / "doubler" / "1").exists()
