"""Where a published version's own side files lie (publish/layout.py), on a real S3 protocol endpoint (moto_server)
and under a real tritonserver: version 2 published over a live version 1 adds or changes no object beside the
version folders; a target published before (side files beside) still rolls back, verifies and prunes; and the
tritonserver loads a version whose folder holds its goldens and stored config and answers the goldens (the probe's
own check), in either layout."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_publish_layout import built  # noqa: F401 - the fixture
from tritonbuild import api

pytestmark = [pytest.mark.s3, pytest.mark.slow]


def _beside(fs, prefix: str) -> dict[str, tuple]:
    """Each object of the model directory that Triton counts as part of every version (not under a version
    folder, not config.pbtxt) → (LastModified, ETag)."""
    out = {}
    for path, info in fs.find(prefix, detail=True).items():
        rel = path[len(prefix) + 1 :]
        if not rel.split("/", 1)[0].isdigit() and rel != "config.pbtxt":
            out[rel] = (info.get("LastModified"), info.get("ETag"))
    return out


def _to_old_layout(fs, root: str, version: int) -> None:
    """As tritonbuild published before: golden-v<N>.npz and config-v<N>.pbtxt beside the version folders."""
    for name in (f"golden-v{version}.npz", f"config-v{version}.pbtxt"):
        fs.mv(f"{root}/doubler/{version}/{name}", f"{root}/doubler/{name}")
    state = json.loads(fs.cat(f"{root}/tritonbuild-manifest.json"))
    files = state["models"]["doubler"]["versions"][str(version)]["files"]
    files[f"golden-v{version}.npz"] = files.pop(f"{version}/golden-v{version}.npz")
    fs.pipe(f"{root}/tritonbuild-manifest.json", json.dumps(state).encode())


def test_a_publish_over_a_live_version_adds_or_changes_no_object_beside_the_folders(
    built,  # noqa: F811
    bucket,
    s3fs_client,
):
    target = f"s3://{bucket}/layout"
    api.publish(built(1), target)
    before = _beside(s3fs_client, f"{bucket}/layout/doubler")
    api.publish(built(2, factor="3"), target)
    s3fs_client.invalidate_cache()
    assert _beside(s3fs_client, f"{bucket}/layout/doubler") == before == {}
    names = {p.rsplit("/", 1)[-1] for p in s3fs_client.find(f"{bucket}/layout/doubler/2")}
    assert names == {"model.py", "golden-v2.npz", "config-v2.pbtxt"}
    assert api.verify_target(target).passed


def test_a_target_published_before_rolls_back_verifies_and_prunes(built, bucket, s3fs_client):  # noqa: F811
    target, root = f"s3://{bucket}/old", f"{bucket}/old"
    api.publish(built(1), target)
    _to_old_layout(s3fs_client, root, 1)
    s3fs_client.invalidate_cache()
    api.publish(built(2, factor="3"), target)
    assert api.verify_target(target).passed
    assert api.rollback(target, "doubler", 1).config_restored == "doubler/config-v1.pbtxt"
    assert api.verify_target(target).passed
    assert api.rollback(target, "doubler", 2).config_restored == "doubler/2/config-v2.pbtxt"
    api.publish(
        built(3), target, keep=1
    )  # 1 pruned with its side files; 2, live, at the next publish
    s3fs_client.invalidate_cache()
    left = sorted(p[len(root) + 1 :] for p in s3fs_client.find(f"{root}/doubler"))
    assert left == [
        "doubler/2/config-v2.pbtxt",
        "doubler/2/golden-v2.npz",
        "doubler/2/model.py",
        "doubler/3/config-v3.pbtxt",
        "doubler/3/golden-v3.npz",
        "doubler/3/model.py",
        "doubler/config.pbtxt",
    ]


@pytest.mark.triton
@pytest.mark.parametrize("layout", ["inside", "beside"])
def test_tritonserver_serves_a_version_folder_holding_its_side_files_and_answers_its_goldens(
    built,  # noqa: F811
    bucket,
    s3fs_client,
    layout,
):
    """The python backend opens model.py by name: golden-v<N>.npz and config-v<N>.pbtxt in the version folder
    are never read, the version loads and answers its goldens bit for bit (probe.golden_problems, the readiness
    probe's check), version 1 in either layout and version 2 in the new one."""
    from tritonbuild.publish.probe import golden_problems
    from tritonbuild.server.embedded import EmbeddedServer

    target = f"s3://{bucket}/served"
    out1, out2 = built(1), built(2, factor="3")
    receipt = api.publish(out1, target)
    if layout == "beside":
        _to_old_layout(s3fs_client, f"{bucket}/served", 1)
    api.publish(out2, target)
    assert api.rollback(target, "doubler", 1).live == 1
    with EmbeddedServer(receipt.triton_url) as server:
        url = f"http://{server.http_url}"
        server.load("doubler")
        assert golden_problems(url, "doubler", 1, out1 / "doubler" / "golden-v1.npz", 30) == []
        api.rollback(target, "doubler", 2)
        server.load("doubler")
        assert golden_problems(url, "doubler", 2, out2 / "doubler" / "golden-v2.npz", 30) == []
        assert golden_problems(url, "doubler", 2, out1 / "doubler" / "golden-v1.npz", 30) != []
