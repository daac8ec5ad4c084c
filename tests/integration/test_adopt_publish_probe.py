"""Issue 43's whole path, against the real programs: a hand-written repository (add_sub with a labels file on
OUTPUT0 and no instance_group, and an ensemble over it) is adopted, built, verified (goldens recorded) and published
to a real S3 endpoint (moto_server), where a real tritonserver polls it with deploy-snippets' own arguments and the
ConfigMap's readiness probe judges it. Then one step changes: without a version bump the publish is refused and
nothing at the target changes; bumped under the unbumped ensemble it is refused too; with both bumped it publishes.
The probe stays ready throughout, on the ConfigMap of either build."""

from __future__ import annotations

import time

import pytest
import yaml

from tests.integration.test_adopt_fidelity import LABELS, write_classifier_repository
from tests.integration.test_fleet_readiness import ManifestServer, _deploy
from tests.integration.test_publish_identity_live import _ready, _serves
from tritonbuild import api
from tritonbuild.errors import PublishError

pytestmark = [pytest.mark.s3, pytest.mark.slow, pytest.mark.triton]


def test_adopt_verify_publish_change_a_step_and_the_probe_stays_ready(
    cli, bucket, s3fs_client, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    target = f"s3://{bucket}/adopted"
    recipes = tmp_path / "recipes"
    r = cli("adopt", write_classifier_repository(tmp_path / "models"), "-o", recipes)
    assert r.exit_code == 0, r.stdout + r.stderr

    def edit(name: str, **changes) -> None:
        path = recipes / f"{name}.yaml"
        spec = yaml.safe_load(path.read_text())
        spec.update(changes)
        path.write_text(yaml.safe_dump(spec, sort_keys=False))

    def build(tag: str):
        out = tmp_path / f"OUT-{tag}"
        r = cli("build", recipes, "-o", out)
        assert r.exit_code == 0, r.stderr
        r = cli("verify", out, "--record", "--force")
        assert r.exit_code == 0, r.stdout + r.stderr
        assert (out / "add_sub" / "classes.txt").read_text() == LABELS
        return out

    first = build("a")
    api.publish(first, target)
    args, folder = _deploy(first, target, tmp_path / "deploy-a")
    server = ManifestServer(args, tmp_path / "server.log")

    def objects() -> dict:
        found = s3fs_client.find(f"{bucket}/adopted", detail=True, refresh=True)
        return {path: info.get("ETag") for path, info in found.items()}

    try:
        server.start()
        _ready(folder, server)
        before = objects()
        edit("add_sub", parameters={"note": "changed"})  # a config change, no version bumped
        with pytest.raises(PublishError, match=r"bump"):
            api.publish(build("b"), target)
        assert objects() == before
        edit("add_sub", version=2)  # bumped, under an ensemble left at its version
        with pytest.raises(PublishError, match=r"add_sub_twice version 1"):
            api.publish(build("c"), target)
        assert objects() == before
        time.sleep(3)  # three polls: nothing changed at the target, nothing reloads
        _ready(folder, server, within=5)
        edit("add_sub_twice", version=2)
        bumped = build("d")
        api.publish(bumped, target)
        _serves(server, "add_sub", 2)
        _serves(server, "add_sub_twice", 2)
        _, now = _deploy(bumped, target, tmp_path / "deploy-d")
        _ready(now, server)  # the new ConfigMap's goldens: the served versions answer them
        _ready(folder, server, within=5)  # and the old one's: its versions are no longer served
    finally:
        server.cleanup()
