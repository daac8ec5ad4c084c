"""A publish target on this machine named by its path (a file:// target, or a copy synced from cloud storage:
`aws s3 sync s3://models/prod DIR`): serve and verify take it as the target it is; the commands that need a
built repository say what it is instead of printing a schema error and 'rebuild the repository'."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import PY_MODEL, PY_RECIPE
from tests.serving import serve_json, stop_serve
from tritonbuild import api
from tritonbuild.errors import PublishError
from tritonbuild.publish.models import TARGET_MANIFEST, TargetManifest


def _synced(cli, write, tmp_path, record: bool = False):
    """A published target (one model, portable numerics) copied to a plain directory, as a sync leaves it;
    record: its goldens recorded in the embedded server first."""
    write("model.py", PY_MODEL)
    recipe = write("doubler.yaml", PY_RECIPE + "numerics: portable\n")
    built = tmp_path / "out"
    assert cli("build", recipe, "-o", built).exit_code == 0
    if record:
        assert cli("verify", built, "--record").exit_code == 0
    api.publish(built, f"file://{tmp_path}/pub", skip_verify=True)
    copy = tmp_path / "synced"
    shutil.copytree(tmp_path / "pub", copy)
    return copy


@pytest.fixture
def synced(cli, write, tmp_path):
    return _synced(cli, write, tmp_path)


def test_serve_a_synced_target_directory_serves_its_live_versions_with_their_numerics(synced):
    """Before: serve DIR read the target's manifest as a build manifest ('not a valid manifest: 3 validation
    errors ... rebuild the repository', exit 6), and had it passed, the live versions' portable numerics
    (which `serve file://` sets) were not set: server/numerics.manifest_numerics parses only a build's."""
    state = TargetManifest.model_validate_json((synced / TARGET_MANIFEST).read_bytes())
    serving = api.serve(synced)
    assert serving.loadable == ["doubler"] and serving.not_loadable == []
    wanted = state.numerics_env()
    assert wanted and {k: serving.server.env.get(k) for k in wanted} == wanted
    assert serving.server.repository == str(synced)  # tritonserver reads the directory itself
    by_url = api.serve(synced.as_uri())
    assert (by_url.loadable, by_url.server.env) == (serving.loadable, serving.server.env)


def test_verify_a_synced_target_directory_checks_its_objects(cli, synced):
    ok = cli("verify", synced)
    assert ok.exit_code == 0 and "objects checked" in ok.stdout, ok.stdout + ok.stderr
    model = next((synced / "doubler" / "1").glob("model.py"))
    model.write_text(model.read_text() + "\n# changed after the publish\n")
    bad = cli("verify", synced)
    assert bad.exit_code != 0 and "doubler/1/model.py" in bad.stdout + bad.stderr, bad.stdout


def test_a_command_that_needs_a_built_repository_names_a_target_directory_for_what_it_is(
    cli, synced, tmp_path
):
    """Before: 'not a valid manifest: 3 validation errors for Manifest' with pydantic's links, and 'rebuild
    the repository'."""
    r = cli("publish", synced, f"file://{tmp_path}/elsewhere")
    assert r.exit_code == PublishError.exit_code
    text = r.stderr
    assert (
        "publish target's tritonbuild-manifest.json" in text and "validation error" not in text
    ), text
    assert f"tritonbuild verify {synced}" in text and "Traceback" not in text, text


@pytest.mark.triton
def test_a_real_tritonserver_serves_a_synced_target_directory_and_infer_sends_its_goldens(
    cli, write, tmp_path
):
    """serve DIR: a real tritonserver answers the goldens bit for bit, given by the built repository or by the
    directory itself (--goldens DIR: the ones published with the live version). infer DIR MODEL (before: 'holds
    a publish target's tritonbuild-manifest.json', exit 9) serves the live version as serve does and sends it
    those goldens."""
    synced = _synced(cli, write, tmp_path, record=True)
    assert (synced / "doubler" / "1" / "golden-v1.npz").is_file()
    proc, info = serve_json(synced)
    try:
        assert info["loaded"] == ["doubler"], info
        for goldens in (tmp_path / "out", synced):
            r = cli("infer", info["http"], "doubler", "--goldens", goldens)
            assert r.exit_code == 0 and r.stdout.count("bit-exact") == 3, r.stdout + r.stderr
    finally:
        assert stop_serve(proc) == 0
    r = cli("infer", synced, "doubler")
    assert r.exit_code == 0 and r.stdout.count("bit-exact") == 3, r.stdout + r.stderr
    (synced / "doubler" / "1" / "golden-v1.npz").unlink()
    r = cli("infer", synced, "doubler")
    assert r.exit_code == 2 and "doubler has no goldens published in" in r.stderr, r.stderr


def test_infer_on_a_synced_target_directory_names_what_it_cannot_serve(cli, synced):
    r = cli("infer", synced, "nope")
    assert r.exit_code == 9 and "cannot serve 'nope' here: no live version of it there" in r.stderr
    assert "models it serves: doubler" in r.stderr, r.stderr


def test_ls_and_rollback_take_a_target_by_its_directory(cli, synced):
    """Before: "target '...' is not a URL" for a directory that serve, verify and infer take."""
    r = cli("ls", synced, "--json")
    assert r.exit_code == 0, r.stderr
    listed = json.loads(r.stdout)
    assert listed["target"] == synced.resolve().as_uri()
    assert [(m["name"], m["live"]) for m in listed["models"]] == [("doubler", 1)], listed
    r = cli("rollback", synced, "doubler", "--to", "1")
    assert r.exit_code == 0, r.stderr
    assert (
        cli("ls", synced.parent / "nothing-here").exit_code == 7
    )  # no target there: still a usage of URLs
