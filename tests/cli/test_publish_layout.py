"""Where a published version's own side files lie at a file:// target (publish/layout.py): its goldens and its
stored config inside its version folder (<model>/<N>/golden-v<N>.npz, <model>/<N>/config-v<N>.pbtxt), so a publish
changes nothing beside the version folders, which Triton counts as part of every version
(tests/contracts/facts/kubernetes.json poll_side_files). A target published before keeps them beside: ls, verify
TARGET, rollback, publish again and prune read both layouts, and a complete version is never moved. The S3 protocol:
tests/integration/test_publish_layout_s3.py."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import PY_MODEL, PY_RECIPE


@pytest.fixture
def built(tmp_path, cli):
    """built(version, factor) → a built repository of 'doubler' with goldens (golden-v<N>.npz beside its config),
    given a passing signed report without running the model."""
    import numpy as np

    from tests.cli.test_publish import _fake_verified
    from tritonbuild.core.npz import write_npz
    from tritonbuild.verify.goldens import to_npz_arrays

    def build(version: int, factor: str = "2") -> Path:
        src = tmp_path / f"src{version}"
        (src / "goldens").mkdir(parents=True)
        (src / "model.py").write_text(PY_MODEL.replace("x * 2 + 1", f"x * {factor} + 1"))
        (src / "r.yaml").write_text(PY_RECIPE.replace("version: 1", f"version: {version}").lstrip())
        x = np.ones((1, 3), np.float32)
        y = x * np.float32(factor) + 1
        write_npz(src / "goldens" / "doubler.npz", to_npz_arrays([{"X": x}], [{"Y": y}]))
        out = tmp_path / f"repo{version}"
        assert cli("build", src / "r.yaml", "-o", out).exit_code == 0
        assert (out / "doubler" / f"golden-v{version}.npz").is_file()  # the built layout: beside
        _fake_verified(cli, out)
        return out

    return build


def beside(model_dir: Path) -> dict[str, int]:
    """What Triton counts as part of every version (core's GetNonModelConfigNorVersionNorDirModifiedTime): each
    entry of the model directory that is not all digits and not config.pbtxt → its modification time, newest
    under it for a folder (GetPathModifiedTime)."""

    def mtime(path: Path) -> int:
        own = path.stat().st_mtime_ns
        return max([own, *(mtime(child) for child in path.iterdir())]) if path.is_dir() else own

    return {
        entry.name: mtime(entry)
        for entry in model_dir.iterdir()
        if not entry.name.isdigit() and entry.name != "config.pbtxt"
    }


def to_old_layout(target: Path, version: int) -> None:
    """Version `version` of doubler as tritonbuild published it before its side files moved into the version
    folder: golden-v<N>.npz and config-v<N>.pbtxt beside the version folders, the manifest listing the goldens
    there."""
    model = target / "doubler"
    for name in (f"golden-v{version}.npz", f"config-v{version}.pbtxt"):
        if (model / str(version) / name).exists():
            os.replace(model / str(version) / name, model / name)
    manifest = target / "tritonbuild-manifest.json"
    state = json.loads(manifest.read_text())
    files = state["models"]["doubler"]["versions"][str(version)]["files"]
    inside = f"{version}/golden-v{version}.npz"
    if inside in files:
        files[f"golden-v{version}.npz"] = files.pop(inside)
    manifest.write_text(json.dumps(state, indent=2))


def test_a_publish_over_a_live_version_changes_nothing_beside_the_version_folders(
    cli, built, tmp_path
):
    """Version 2 published over a live version 1: its goldens and stored config go into its folder, and no entry
    of the model directory other than config.pbtxt and the version folders is new or newer (before, golden-v2.npz
    and config-v2.pbtxt were written beside them just before the switch, and a poll that straddled the switch
    loaded version 2 twice: the fleet test, 1 run in 7)."""
    target, model = f"file://{tmp_path}/pub", tmp_path / "pub" / "doubler"
    assert cli("publish", built(1), target).exit_code == 0
    assert sorted(p.name for p in model.iterdir()) == ["1", "config.pbtxt"]
    assert {p.name for p in (model / "1").iterdir()} == {
        "model.py",
        "golden-v1.npz",
        "config-v1.pbtxt",
    }
    before = beside(model)
    out2 = built(2, factor="3")
    assert cli("publish", out2, target).exit_code == 0
    assert beside(model) == before == {}
    assert (model / "2" / "golden-v2.npz").read_bytes() == (
        out2 / "doubler" / "golden-v2.npz"
    ).read_bytes()
    assert "versions: 2" in (model / "2" / "config-v2.pbtxt").read_text()
    state = json.loads((tmp_path / "pub" / "tritonbuild-manifest.json").read_text())
    assert sorted(state["models"]["doubler"]["versions"]["2"]["files"]) == [
        "2/golden-v2.npz",
        "2/model.py",
    ]
    assert json.loads(cli("verify", target, "--json").stdout)["passed"]


def test_the_version_folder_is_complete_before_the_switch_and_nothing_beside_is_written(
    cli, built, tmp_path, monkeypatch
):
    """Every write of a publish over a live version, in order: the new version's folder (its stored config, its
    files, its goldens), then config.pbtxt, the switch; nothing else in the model directory."""
    from tritonbuild.publish import objects

    writes: list[str] = []
    upload, write_bytes = objects.upload, objects.write_bytes

    def recorded_upload(target, local, path, reporter):
        upload(target, local, path, reporter)
        writes.append(path.split("/pub/", 1)[-1])

    def recorded_write(target, path, data):
        writes.append(path.split("/pub/", 1)[-1])
        return write_bytes(target, path, data)

    target = f"file://{tmp_path}/pub"
    assert cli("publish", built(1), target).exit_code == 0
    out2 = built(2)
    monkeypatch.setattr(objects, "upload", recorded_upload)
    monkeypatch.setattr(objects, "write_bytes", recorded_write)
    assert cli("publish", out2, target).exit_code == 0
    model = [w.split("doubler/", 1)[1] for w in writes if w.startswith("doubler/")]
    assert model[0] == "2/config-v2.pbtxt" and model[-1] == "config.pbtxt", model
    assert sorted(model[1:-1]) == ["2/golden-v2.npz", "2/model.py"], model


@pytest.mark.parametrize("layout", ["inside", "beside"])
def test_ls_verify_rollback_and_publish_again_read_either_layout(cli, built, tmp_path, layout):
    """Version 1 published in either layout (beside: as tritonbuild did before), version 2 in the new one: ls has
    no note, verify TARGET passes, rollback restores each version's own stored config from where it lies,
    publishing version 1 again is 'unchanged' and moves nothing, and version 1's files stay where they were."""
    target, pub = f"file://{tmp_path}/pub", tmp_path / "pub"
    model = pub / "doubler"
    out1 = built(1)
    assert cli("publish", out1, target).exit_code == 0
    if layout == "beside":
        to_old_layout(pub, 1)
    kept = {
        p.relative_to(model).as_posix(): p.read_bytes() for p in model.rglob("*") if p.is_file()
    }
    assert cli("publish", built(2, factor="3"), target).exit_code == 0
    assert (model / "2" / "config-v2.pbtxt").is_file() and not (model / "config-v2.pbtxt").exists()
    info = json.loads(cli("ls", target, "--json").stdout)["models"][0]
    assert (info["live"], info["complete"], info["notes"]) == (2, [1, 2], [])
    assert json.loads(cli("verify", target, "--json").stdout)["passed"]

    r = cli("rollback", target, "doubler", "--to", "1", "--json")
    assert r.exit_code == 0, r.stderr
    stored = "doubler/config-v1.pbtxt" if layout == "beside" else "doubler/1/config-v1.pbtxt"
    assert json.loads(r.stdout)["config_restored"] == stored
    assert (model / "config.pbtxt").read_bytes() == (pub / stored).read_bytes()
    assert json.loads(cli("verify", target, "--json").stdout)["passed"]
    again = json.loads(cli("publish", out1, target, "--json").stdout)
    assert {a["action"] for a in again["actions"]} == {"unchanged"}
    r = cli("rollback", target, "doubler", "--to", "2", "--json")
    assert json.loads(r.stdout)["config_restored"] == "doubler/2/config-v2.pbtxt"
    now = {p.relative_to(model).as_posix(): p.read_bytes() for p in model.rglob("*") if p.is_file()}
    assert {rel: data for rel, data in now.items() if rel in kept and rel != "config.pbtxt"} == {
        rel: data for rel, data in kept.items() if rel != "config.pbtxt"
    }  # version 1 neither moved nor rewritten
    assert json.loads(cli("verify", target, "--json").stdout)["passed"]


@pytest.mark.parametrize("layout", ["inside", "beside"])
def test_prune_removes_a_versions_side_files_in_either_layout(cli, built, tmp_path, layout):
    target, pub = f"file://{tmp_path}/pub", tmp_path / "pub"
    assert cli("publish", built(1), target).exit_code == 0
    if layout == "beside":
        to_old_layout(pub, 1)
        assert (pub / "doubler" / "golden-v1.npz").is_file()
    assert cli("publish", built(2), target).exit_code == 0
    # version 2, live when the publish starts, goes at the next publish (planner.deferred)
    out3 = built(3)
    for pruned_now, left in (([1], ["2", "3"]), ([2], ["3"])):
        r = cli("publish", out3, target, "--keep", "1", "--json")
        assert r.exit_code == 0, r.stderr
        actions = json.loads(r.stdout)["actions"]
        assert sorted(a["version"] for a in actions if a["action"] == "prune") == pruned_now
        assert sorted(p.name for p in (pub / "doubler").iterdir()) == [*left, "config.pbtxt"]
    assert json.loads(cli("verify", target, "--json").stdout)["passed"]


def test_an_orphan_left_by_an_interrupted_prune_goes_with_its_side_files(cli, built, tmp_path):
    """A prune interrupted after it forgot version 1 (the manifest written) left its folder and, in the layout
    before, its goldens and stored config beside it: the next publish with --keep removes all of them."""
    target, pub = f"file://{tmp_path}/pub", tmp_path / "pub"
    assert cli("publish", built(1), target).exit_code == 0
    to_old_layout(pub, 1)
    assert cli("publish", built(2), target).exit_code == 0
    manifest = pub / "tritonbuild-manifest.json"
    state = json.loads(manifest.read_text())
    del state["models"]["doubler"]["versions"]["1"]
    manifest.write_text(json.dumps(state))
    r = cli("publish", built(3), target, "--keep", "2", "--json")
    assert r.exit_code == 0, r.stderr
    assert sorted(p.name for p in (pub / "doubler").iterdir()) == ["2", "3", "config.pbtxt"]


def test_a_version_folder_file_named_like_a_side_file_is_refused(cli, built, tmp_path):
    out = built(1)
    (out / "doubler" / "1" / "golden-v1.npz").write_bytes(b"not ours")
    from tritonbuild.repository.assemble import write_manifest
    from tritonbuild.repository.manifest import read_manifest

    manifest = read_manifest(out)
    write_manifest(out, manifest.toolchain, manifest.models)
    r = cli("publish", out, f"file://{tmp_path}/pub", "--skip-verify")
    assert (
        r.exit_code == 7
        and "doubler/1/golden-v1.npz is a file of the version directory" in r.stderr
    )
    assert "Traceback" not in r.stderr and not (tmp_path / "pub" / "doubler" / "1").exists()


def test_the_switch_waits_until_the_version_folders_written_are_still(
    cli, built, tmp_path, monkeypatch
):
    """A poll that read a version folder before its last file landed and config.pbtxt after the switch would load
    the version with a stale timestamp, and the next poll would load it again (protocol.py settle): the switch
    comes TRITONBUILD_SWITCH_SETTLE_S after the last write into the model directory, once per publish."""
    import time

    from tritonbuild.publish import objects

    times: list[tuple[str, float]] = []
    upload, write_bytes = objects.upload, objects.write_bytes

    def recorded_upload(target, local, path, reporter):
        upload(target, local, path, reporter)
        times.append((path.split("/pub/", 1)[-1], time.monotonic()))

    def recorded_write(target, path, data):
        write_bytes(target, path, data)
        times.append((path.split("/pub/", 1)[-1], time.monotonic()))

    target = f"file://{tmp_path}/pub"
    assert cli("publish", built(1), target).exit_code == 0
    out2 = built(2)
    monkeypatch.setattr(objects, "upload", recorded_upload)
    monkeypatch.setattr(objects, "write_bytes", recorded_write)
    monkeypatch.setenv("TRITONBUILD_SWITCH_SETTLE_S", "0.6")
    assert cli("publish", out2, target).exit_code == 0
    switch = next(t for path, t in times if path == "doubler/config.pbtxt")
    assert switch - max(t for path, t in times if path.startswith("doubler/2/")) >= 0.6
    times.clear()
    assert cli("publish", out2, target).exit_code == 0  # nothing written: no wait, no switch
    assert [path for path, _ in times] == ["tritonbuild-manifest.json"]


@pytest.mark.parametrize("value", ["soon", "-1"])
def test_a_settle_that_is_not_seconds_is_a_usage_error_before_anything_is_written(
    cli, built, tmp_path, monkeypatch, value
):
    out = built(1)
    monkeypatch.setenv("TRITONBUILD_SWITCH_SETTLE_S", value)
    r = cli("publish", out, f"file://{tmp_path}/pub")
    assert (
        r.exit_code == 2
        and "TRITONBUILD_SWITCH_SETTLE_S" in r.stderr
        and "Traceback" not in r.stderr
    )
    assert not (tmp_path / "pub").exists()


def test_a_version_with_other_labels_is_refused_before_it_overwrites_the_live_ones(cli, tmp_path):
    """Triton reads an output's labels file from the model directory for every version (core model.cc joins
    label_filename to the model directory). Before: publishing version 2 with changed labels overwrote the file
    version 1 (live) was published with: version 1 answered with version 2's labels from then on (before the
    switch, and after a rollback), verify TARGET failed ('inception_graphdef/inception_labels.txt has size 8909,
    expected 8900') and rollback refused version 1 as damaged. Now refused (exit 7) before anything is
    written; the file under a new name publishes, and version 1 keeps its labels."""
    from tests.contracts import repositories

    repo = tmp_path / "models"
    repo.mkdir()
    model = repositories.write_inception_graphdef(repo)
    target, pub = f"file://{tmp_path / 'pub'}", tmp_path / "pub" / model.name
    assert cli("publish", repo, target).exit_code == 0
    labels = model / "inception_labels.txt"
    first = labels.read_bytes()
    (model / "2").mkdir()
    (model / "2" / "model.graphdef").write_bytes(b"\x0a\x01")
    labels.write_bytes(first.replace(b"\n", b" (v2)\n", 3))
    before = {p: p.read_bytes() for p in pub.rglob("*") if p.is_file()}
    r = cli("publish", repo, target)
    assert r.exit_code == 7, r.stderr
    assert (
        "inception_graphdef/inception_labels.txt: version 2 carries other content than version 1"
        in r.stderr
    )
    assert "(live at the target)" in r.stderr and "another name" in r.stderr, r.stderr
    assert {p: p.read_bytes() for p in pub.rglob("*") if p.is_file()} == before  # nothing written
    # the changed labels under their own name (the config names them), version 1 no longer in the repository
    # (its config would change): published; version 1's labels stay its own
    labels.rename(model / "labels-v2.txt")
    shutil.rmtree(model / "1")
    config = model / "config.pbtxt"
    config.write_text(config.read_text().replace("inception_labels.txt", "labels-v2.txt"))
    assert cli("publish", repo, target).exit_code == 0
    assert (pub / "inception_labels.txt").read_bytes() == first
    assert cli("verify", target).exit_code == 0
    assert cli("rollback", target, model.name, "--to", "1").exit_code == 0
    assert "inception_labels.txt" in (pub / "config.pbtxt").read_text()
    assert cli("verify", target).exit_code == 0
