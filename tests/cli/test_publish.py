"""publish/ls/rollback/verify TARGET on file:// targets (the S3 protocol is in tests/integration)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import PY_MODEL, PY_RECIPE


@pytest.fixture
def repo(tmp_path, cli):
    def build(version: int, factor: str = "2") -> object:
        src = tmp_path / f"src{version}"
        src.mkdir(exist_ok=True)
        (src / "model.py").write_text(PY_MODEL.replace("x * 2 + 1", f"x * {factor} + 1"))
        (src / "r.yaml").write_text(PY_RECIPE.replace("version: 1", f"version: {version}").lstrip())
        out = tmp_path / f"repo{version}"
        assert cli("build", src / "r.yaml", "-o", out).exit_code == 0
        return out

    return build


def _fake_verified(cli, out):
    """Write a passing report for out's manifest without running models (the gate reads the report and checks
    its signature: signed here with the test's own machine key)."""
    from tritonbuild.core.hashing import pretty_json
    from tritonbuild.repository.manifest import REPORT_NAME, read_manifest
    from tritonbuild.verify.models import VerificationReport

    m = read_manifest(out)
    report = VerificationReport(
        manifest_digest=m.digest, toolchain={}, static=[], models=[], passed=True
    ).signed()
    (out / REPORT_NAME).write_bytes(pretty_json(report.model_dump(mode="json")))


def test_gate_refuses_unverified_repository(cli, repo, tmp_path):
    out = repo(1)
    target = f"file://{tmp_path}/pub"
    r = cli("publish", out, target)
    assert (
        r.exit_code == 7
        and "has no verification report" in r.stderr
        and "tritonbuild verify" in r.stderr
    )
    assert not (tmp_path / "pub").exists()


def test_gate_refuses_stale_report(cli, repo, tmp_path):
    out = repo(1)
    _fake_verified(cli, out)
    (out / "doubler" / "1" / "model.py").write_text("# changed after verify\n")
    from tritonbuild.repository.assemble import write_manifest
    from tritonbuild.repository.manifest import read_manifest

    m = read_manifest(out)
    write_manifest(out, m.toolchain, m.models)
    r = cli("publish", out, f"file://{tmp_path}/pub")
    assert r.exit_code == 7 and "another build" in r.stderr


def test_skip_verify_is_loud_and_recorded(cli, repo, tmp_path):
    out = repo(1)
    r = cli("publish", out, f"file://{tmp_path}/pub", "--skip-verify")
    assert r.exit_code == 0 and "UNVERIFIED" in r.stderr
    ls = json.loads(cli("ls", f"file://{tmp_path}/pub", "--json").stdout)
    assert ls["models"][0]["verification"] == "skipped"


def test_ls_prints_the_table_digest_lock_and_server_line(cli, repo, tmp_path):
    """ls's human output reads the typed listing (it once indexed it as a dict: an internal error, exit 1)."""
    out = repo(1)
    assert cli("publish", out, f"file://{tmp_path}/pub", "--skip-verify").exit_code == 0
    r = cli("ls", f"file://{tmp_path}/pub")
    assert r.exit_code == 0, r.stderr
    assert (
        "doubler" in r.stdout
        and "target manifest sha256: " in r.stdout
        and "lock: none" in r.stdout
    )
    assert f"tritonserver --model-repository={tmp_path}/pub" in r.stdout


def test_publish_switch_rollback_prune_and_verify_target(cli, repo, tmp_path):
    target = f"file://{tmp_path}/pub"
    pub = tmp_path / "pub" / "doubler"
    for v in (1, 2, 3):
        out = repo(v, factor=str(v + 1))
        _fake_verified(cli, out)
        r = cli("publish", out, target, "--json")
        assert r.exit_code == 0, r.stderr
        actions = {a["action"] for a in json.loads(r.stdout)["actions"]}
        assert "switch" in actions and "upload" in actions
        assert f"versions: {v}" in (pub / "config.pbtxt").read_text()
    info = json.loads(cli("ls", target, "--json").stdout)["models"][0]
    assert (info["live"], info["complete"], info["notes"]) == (3, [1, 2, 3], [])

    r = cli("rollback", target, "doubler", "--to", "1", "--json")
    assert r.exit_code == 0
    assert json.loads(r.stdout) == {
        "target": target,
        "model": "doubler",
        "live": 1,
        "previous": 3,
        "config_restored": "doubler/1/config-v1.pbtxt",
        "interface_changed": False,
        "notified": [],
    }
    assert "versions: 1" in (pub / "config.pbtxt").read_text()
    r = cli("rollback", target, "doubler", "--to", "7")
    assert r.exit_code == 7 and "not a complete published version" in r.stderr

    out4 = repo(4, factor="5")
    _fake_verified(cli, out4)
    dry = json.loads(cli("publish", out4, target, "--keep", "2", "--dry-run", "--json").stdout)
    # version 1 is live when this publish starts: polling servers copy the whole model directory to
    # load version 4 after the switch, so it is pruned by the next publish, not this one
    assert {(a["action"], a["version"]) for a in dry["actions"] if a["action"] == "prune"} == {
        ("prune", 2)
    }
    assert not (pub / "4").exists()  # dry run changed nothing
    assert cli("publish", out4, target, "--keep", "2").exit_code == 0
    assert sorted(p.name for p in pub.iterdir() if p.is_dir()) == ["1", "3", "4"]
    r = cli("publish", out4, target, "--keep", "2", "--json")
    first = json.loads(r.stdout)["actions"][0]
    assert (first["action"], first["version"]) == ("prune", 1)
    assert sorted(p.name for p in pub.iterdir() if p.is_dir()) == ["3", "4"]
    assert json.loads(cli("verify", target, "--json").stdout)["passed"]

    (pub / "3" / "model.py").write_text("tampered\n")
    r = cli("verify", target, "--json")
    assert r.exit_code == 6 and "doubler/3/model.py" in " ".join(json.loads(r.stdout)["problems"])


def test_published_version_is_never_rewritten(cli, repo, tmp_path):
    target = f"file://{tmp_path}/pub"
    out = repo(1)
    _fake_verified(cli, out)
    assert cli("publish", out, target).exit_code == 0
    out_b = repo(1, factor="9")  # same version, different content
    _fake_verified(cli, out_b)
    r = cli("publish", out_b, target)
    assert r.exit_code == 7 and "never rewritten" in r.stderr and "bump 'version'" in r.stderr
    assert "x * 2 + 1" in (tmp_path / "pub" / "doubler" / "1" / "model.py").read_text()


def test_lock_held_elsewhere_stops_a_second_publisher(cli, repo, tmp_path):
    target = f"file://{tmp_path}/pub"
    (tmp_path / "pub").mkdir()
    (tmp_path / "pub" / "tritonbuild.lock").write_text(
        '{"host": "ci-runner-7", "pid": 1, "since": "x"}'
    )
    out = repo(1)
    _fake_verified(cli, out)
    r = cli("publish", out, target)
    assert (
        r.exit_code == 7
        and "another publish to this target is in progress (ci-runner-7" in r.stderr
    )
    assert not (tmp_path / "pub" / "doubler").exists()
    assert cli("publish", out, target, "--break-lock").exit_code == 0
    assert not (tmp_path / "pub" / "tritonbuild.lock").exists()


def test_missing_parent_directory_is_a_publish_error(cli, repo, tmp_path):
    out = repo(1)
    _fake_verified(cli, out)
    r = cli("publish", out, f"file://{tmp_path}/no/such/dir")
    assert r.exit_code == 7 and "does not exist" in r.stderr


def test_rerun_after_an_interrupted_upload_sends_only_what_is_missing(cli, repo, tmp_path):
    import shutil

    target = f"file://{tmp_path}/pub"
    out = repo(1)
    _fake_verified(cli, out)
    # what a publish killed mid-upload leaves: a placeholder config and part of the version
    (tmp_path / "pub" / "doubler" / "1").mkdir(parents=True)
    shutil.copy(out / "doubler" / "1" / "model.py", tmp_path / "pub" / "doubler" / "1" / "model.py")
    (tmp_path / "pub" / "doubler" / "config.pbtxt").write_bytes(
        (out / "doubler" / "config.pbtxt")
        .read_bytes()
        .replace(b"latest {\n    num_versions: 1\n  }", b"specific {\n  }")
    )
    info = json.loads(cli("ls", target, "--json").stdout)["models"][0]
    assert (
        info["live"] is None
        and info["complete"] == []
        and "incomplete versions [1]" in info["notes"][0]
    )
    r = cli("publish", out, target, "--json")
    assert r.exit_code == 0
    acts = {a["path"]: a["action"] for a in json.loads(r.stdout)["actions"] if a["path"]}
    assert acts == {
        "doubler/1/model.py": "skip"
    }  # no goldens in this repo: model.py is the only file
    info = json.loads(cli("ls", target, "--json").stdout)["models"][0]
    assert (info["live"], info["complete"], info["notes"]) == (1, [1], [])


def test_dry_run_changes_nothing(cli, repo, tmp_path):
    out = repo(1)
    _fake_verified(cli, out)
    (tmp_path / "pub").mkdir()
    r = cli("publish", out, f"file://{tmp_path}/pub", "--dry-run", "--json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["dry_run"] and [a["action"] for a in doc["actions"]] == [
        "create",
        "upload",
        "switch",
    ]
    assert list((tmp_path / "pub").iterdir()) == []


def test_a_prune_interrupted_after_forgetting_is_finished_by_the_next_publish(cli, repo, tmp_path):
    import shutil

    target = f"file://{tmp_path}/pub"
    for v in (1, 2):
        out = repo(v, factor=str(v + 1))
        _fake_verified(cli, out)
        assert cli("publish", out, target).exit_code == 0
    # what a kill between 'forget v1 in the manifest' and 'delete v1' leaves behind
    state = json.loads((tmp_path / "pub" / "tritonbuild-manifest.json").read_text())
    del state["models"]["doubler"]["versions"]["1"]
    (tmp_path / "pub" / "tritonbuild-manifest.json").write_text(json.dumps(state))
    info = json.loads(cli("ls", target, "--json").stdout)["models"][0]
    assert "versions [1] left by an interrupted prune" in info["notes"][0]
    out3 = repo(3, factor="4")
    _fake_verified(cli, out3)
    assert cli("publish", out3, target, "--keep", "2").exit_code == 0
    info = json.loads(cli("ls", target, "--json").stdout)["models"][0]
    assert (info["present"], info["complete"], info["notes"]) == ([2, 3], [2, 3], [])
    shutil.rmtree(tmp_path / "pub")


def test_publishing_a_directory_that_is_not_a_repository_exits_with_the_publish_code(cli, tmp_path):
    """read_repository lived in verify/ and raised VerifyError: publish exited 6 (verify) for its own failure."""
    (tmp_path / "not-a-repo").mkdir()
    r = cli("publish", tmp_path / "not-a-repo", f"file://{tmp_path / 'target'}")
    assert (
        r.exit_code == 7
        and "is not a tritonbuild repository" in r.stderr
        and "tritonbuild build" in r.stderr
    )
    assert not (tmp_path / "target").exists()


def test_rollback_restores_the_versions_own_config(cli, repo, tmp_path):
    """v1 reads input X, v2 renames it to A: rolling back to 1 must serve v1 under v1's config (it used to pin
    version 1 in v2's config: every inference failed while ls and verify TARGET said all was well)."""
    target = f"file://{tmp_path}/pub"
    pub = tmp_path / "pub" / "doubler"
    out1 = repo(1)
    _fake_verified(cli, out1)
    assert cli("publish", out1, target).exit_code == 0
    src = tmp_path / "src2"
    src.mkdir()
    (src / "model.py").write_text(PY_MODEL.replace('"X"', '"A"'))
    (src / "r.yaml").write_text(
        PY_RECIPE.replace("version: 1", "version: 2").replace("name: X", "name: A").lstrip()
    )
    out2 = tmp_path / "repo2"
    assert cli("build", src / "r.yaml", "-o", out2).exit_code == 0
    _fake_verified(cli, out2)
    assert cli("publish", out2, target).exit_code == 0
    assert 'name: "A"' in (pub / "config.pbtxt").read_text()
    assert (pub / "1" / "config-v1.pbtxt").is_file() and (pub / "2" / "config-v2.pbtxt").is_file()

    r = cli("rollback", target, "doubler", "--to", "1", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["interface_changed"] is True
    live = (pub / "config.pbtxt").read_text()
    assert 'name: "X"' in live and 'name: "A"' not in live and "versions: 1" in live
    assert live == (pub / "1" / "config-v1.pbtxt").read_text()
    assert json.loads(cli("verify", target, "--json").stdout)["passed"]

    # verify TARGET: the live config must be the one verified with the live version
    (pub / "config.pbtxt").write_text(live.replace('name: "X"', 'name: "A"'))
    r = cli("verify", target, "--json")
    assert r.exit_code == 6
    assert any(
        "not the config version 1 was verified with" in p for p in json.loads(r.stdout)["problems"]
    )


def test_rollback_refuses_a_version_without_its_stored_config(cli, repo, tmp_path):
    target = f"file://{tmp_path}/pub"
    for v in (1, 2):
        out = repo(v)
        _fake_verified(cli, out)
        assert cli("publish", out, target).exit_code == 0
    # as an older tritonbuild left it: no config-v1.pbtxt, no record of it
    manifest = tmp_path / "pub" / "tritonbuild-manifest.json"
    state = json.loads(manifest.read_text())
    state["models"]["doubler"]["versions"]["1"]["config_sha256"] = None
    manifest.write_text(json.dumps(state))
    (tmp_path / "pub" / "doubler" / "1" / "config-v1.pbtxt").unlink()
    r = cli("rollback", target, "doubler", "--to", "1")
    assert (
        r.exit_code == 7
        and "has no stored config" in r.stderr
        and "publish version 1 again" in r.stderr
    )
    assert "versions: 2" in (tmp_path / "pub" / "doubler" / "config.pbtxt").read_text()
    # publishing version 1 again stores it (nothing re-sent), then the rollback works
    assert cli("publish", tmp_path / "repo1", target).exit_code == 0
    assert cli("rollback", target, "doubler", "--to", "1").exit_code == 0


def test_notify_only_the_models_that_changed(cli, repo, tmp_path):
    """--notify loads the models whose config this publish changed (created or switched), READY or not; a model
    it did not change is never asked, READY or not (absent from the index after a restart, or UNAVAILABLE after a
    failed load): a load of a model the publish did not touch could only fail it or flip the server's readiness
    (issue 43). A rollback notifies the model it switched."""
    seen, index = [], {}
    srv, url = _fake_triton(index, seen)
    load = "/v2/repository/models/doubler/load"
    try:
        target = f"file://{tmp_path}/pub"
        out = repo(1)
        _fake_verified(cli, out)
        assert cli("publish", out, target, "--notify", url).exit_code == 0
        assert seen == [load]
        assert (
            cli("publish", out, target, "--notify", url).exit_code == 0
        )  # unchanged and READY: no load
        assert seen == [load]
        index.clear()  # the server restarted without it
        assert cli("publish", out, target, "--notify", url).exit_code == 0
        index["doubler"] = "UNAVAILABLE"  # a failed load
        r = cli("publish", out, target, "--notify", url)
        assert r.exit_code == 0 and "did not change it" in r.stdout
        assert seen == [load]  # unchanged: not asked either time
        out2 = repo(2)
        _fake_verified(cli, out2)
        assert cli("publish", out2, target, "--notify", url).exit_code == 0
        assert seen == [load] * 2  # changed (switched to version 2), though not READY there
        r = cli("rollback", target, "doubler", "--to", "1", "--notify", url)
        assert r.exit_code == 0 and "loaded" in r.stdout
        assert seen == [load] * 3
    finally:
        srv.shutdown()


def _picky_published(cli, tmp_path, target: str) -> None:
    """A second model, picky, published to target beside doubler (by its own publish)."""
    src = tmp_path / "picky-src"
    src.mkdir()
    (src / "model.py").write_text(PY_MODEL)
    (src / "r.yaml").write_text(
        PY_RECIPE.replace("name: doubler", "name: picky")
        .replace("goldens/doubler.npz", "goldens/picky.npz")
        .lstrip()
    )
    out = tmp_path / "picky-repo"
    assert cli("build", src / "r.yaml", "-o", out).exit_code == 0
    _fake_verified(cli, out)
    assert cli("publish", out, target).exit_code == 0


def test_notify_never_fails_a_publish_over_a_model_it_did_not_change(cli, repo, tmp_path):
    """The server serves doubler and never served picky (it cannot: a GPU model on a CPU server), both published
    to its target. Publishing doubler v2 asks it for doubler only: picky, unchanged, was asked too (not READY
    there) and refused, exit 7, and on a real server its failed load flips strict readiness 200 -> 400."""
    seen = []
    index = {"doubler": "READY", "picky": ""}

    def answer(path: str) -> tuple[int, bytes]:
        if path == "/v2/repository/index":
            return 200, json.dumps(
                [{"name": n, **({"state": st} if st else {})} for n, st in index.items()]
            ).encode()
        seen.append(path)
        if "/picky/" in path:
            return 400, b'{"error":"load failed for model \'picky\': needs a GPU"}'
        return 200, b""

    srv, url = _stand_in(answer)
    try:
        target = f"file://{tmp_path}/pub"
        out = repo(1)
        _fake_verified(cli, out)
        assert cli("publish", out, target).exit_code == 0
        _picky_published(cli, tmp_path, target)
        out2 = repo(2)
        _fake_verified(cli, out2)
        r = cli("publish", out2, target, "--notify", url, "--json")
        assert r.exit_code == 0, r.stdout + r.stderr  # was 7: 'picky' refused
        assert seen == ["/v2/repository/models/doubler/load"]
        notified = json.loads(r.stdout)["notified"]
        assert [(n["model"], n["ok"]) for n in notified] == [("doubler", True)]
    finally:
        srv.shutdown()


def _stand_in(answer) -> tuple:
    """A tritonserver stand-in on a free port whose every POST (body read) gets answer(path) -> (status, body):
    (server, its URL); shut it down after."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, body = answer(self.path)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def _fake_triton(index: dict[str, str], seen: list[str]):
    """A stand-in for tritonserver's repository API: the index (name → state, '' for never loaded) and loads."""

    def answer(path: str) -> tuple[int, bytes]:
        if path == "/v2/repository/index":
            return 200, json.dumps(
                [
                    {"name": n, **({"version": "1", "state": st} if st else {})}
                    for n, st in index.items()
                ]
            ).encode()
        seen.append(path)
        index[path.split("/")[-2]] = "READY"
        return 200, b""

    return _stand_in(answer)


def test_notify_asks_each_server_of_a_mixed_fleet_only_for_the_models_it_serves(
    cli, repo, tmp_path
):
    """Two servers on one target: the GPU one serves 'llm', the CPU one 'doubler' (Triton lists every model of
    the repository; a never-loaded one has no state). Every server was asked to load every model."""
    seen_cpu, seen_gpu = [], []
    cpu, cpu_url = _fake_triton({"doubler": "READY", "llm": ""}, seen_cpu)
    gpu, gpu_url = _fake_triton({"doubler": "", "llm": "READY"}, seen_gpu)
    try:
        out = repo(1)
        _fake_verified(cli, out)
        r = cli(
            "publish",
            out,
            f"file://{tmp_path}/pub",
            "--notify",
            cpu_url,
            "--notify",
            gpu_url,
            "--json",
        )
        assert r.exit_code == 0, r.stderr
        assert seen_cpu == ["/v2/repository/models/doubler/load"] and seen_gpu == []
        skipped = [n for n in json.loads(r.stdout)["notified"] if n.get("skipped")]
        assert [(n["server"], n["model"]) for n in skipped] == [(gpu_url, "doubler")]
        assert f"served by {cpu_url}" in skipped[0]["message"]
        text = cli(
            "publish",
            repo(2),
            f"file://{tmp_path}/pub",
            "--skip-verify",
            "--notify",
            cpu_url,
            "--notify",
            gpu_url,
        ).stdout
        assert f"notify {gpu_url} load doubler: skipped not asked" in text
        # a model no notified server serves yet is asked of every server
        seen_cpu.clear()
        cpu2, cpu2_url = _fake_triton({"doubler": ""}, seen_cpu)
        try:
            out3 = repo(3)
            _fake_verified(cli, out3)
            assert (
                cli("publish", out3, f"file://{tmp_path}/pub2", "--notify", cpu2_url).exit_code == 0
            )
            assert seen_cpu == ["/v2/repository/models/doubler/load"]
        finally:
            cpu2.shutdown()
    finally:
        cpu.shutdown()
        gpu.shutdown()


def _refusing_triton(seen: list[str]):
    """A tritonserver that lists every model as never loaded and answers each load with Triton's 400."""

    def answer(path: str) -> tuple[int, bytes]:
        if path == "/v2/repository/index":
            return 200, json.dumps([{"name": "doubler"}]).encode()
        seen.append(path)
        return 400, b'{"error":"load failed for model \'doubler\': needs a GPU"}'

    return _stand_in(answer)


def test_notify_reports_a_server_that_cannot_run_a_model_others_loaded_and_honours_a_mapping(
    cli, repo, tmp_path
):
    """One server refuses the model another loaded: reported 'cannot run here', exit 0 (it was exit 7 for every
    publish); a server mapped to other models (URL#MODEL) is never asked; refused everywhere, it is a failure."""
    refused, loaded, mapped_seen = [], [], []
    bad, bad_url = _refusing_triton(refused)
    good, good_url = _fake_triton({"doubler": ""}, loaded)
    mapped, mapped_url = _refusing_triton(mapped_seen)
    try:
        out = repo(1)
        _fake_verified(cli, out)
        r = cli(
            "publish",
            out,
            f"file://{tmp_path}/pub",
            "--notify",
            bad_url,
            "--notify",
            good_url,
            "--notify",
            f"{mapped_url}#other",
            "--json",
        )
        assert r.exit_code == 0, r.stdout
        notified = {n["server"]: n for n in json.loads(r.stdout)["notified"]}
        assert notified[bad_url]["cannot_run"] and "needs a GPU" in notified[bad_url]["message"]
        assert notified[good_url]["ok"] and notified[mapped_url]["skipped"] and mapped_seen == []
        alone = cli(
            "publish", repo(2), f"file://{tmp_path}/pub2", "--skip-verify", "--notify", bad_url
        )
        assert (
            alone.exit_code == 7 and "FAILED" in alone.stdout
        )  # no server loaded it: not one server's problem
    finally:
        for server in (bad, good, mapped):
            server.shutdown()


def test_publish_json_with_a_failed_notify_is_one_document(cli, repo, tmp_path):
    """--json prints ONE document even when a notify fails: the receipt (notify failures included) with the
    error beside it; still exit 7. (It printed the receipt, then the error: two documents, unparseable.)"""
    srv, url = _stand_in(lambda path: (400, b'{"error":"failed to load doubler"}'))
    try:
        out = repo(1)
        _fake_verified(cli, out)
        r = cli("publish", out, f"file://{tmp_path}/pub", "--json", "--notify", url)
    finally:
        srv.shutdown()
    assert r.exit_code == 7
    doc = json.loads(r.stdout)
    assert [n["ok"] for n in doc["notified"]] == [False] and doc["notified"][0][
        "model"
    ] == "doubler"
    assert doc["error"]["error"] == "publish" and doc["error"]["exit_code"] == 7
    assert "did not load" in doc["error"]["message"] and doc["manifest_digest"]
    assert (tmp_path / "pub" / "doubler").is_dir()  # the target itself is complete


def test_version_policy_serves_versions_side_by_side(cli, repo, tmp_path):
    """A recipe's version_policy reaches the target: latest 2 pins the two newest complete versions (clients can
    pin either); an interface change between them is refused (Triton serves every version under one config)."""
    target = f"file://{tmp_path}/pub"
    pub = tmp_path / "pub" / "doubler"
    for v in (1, 2):
        src = tmp_path / f"src{v}"
        src.mkdir()
        (src / "model.py").write_text(PY_MODEL.replace("x * 2", f"x * {v + 1}"))
        (src / "r.yaml").write_text(
            PY_RECIPE.replace("version: 1", f"version: {v}").lstrip()
            + "version_policy: {latest: 2}\n"
        )
        out = tmp_path / f"out{v}"
        assert cli("build", src / "r.yaml", "-o", out).exit_code == 0
        _fake_verified(cli, out)
        r = cli("publish", out, target, "--keep", "1", "--json")
        assert r.exit_code == 0, r.stderr
    assert "versions: [1, 2]" in (pub / "config.pbtxt").read_text() or (
        "versions: 1" in (pub / "config.pbtxt").read_text()
        and "versions: 2" in (pub / "config.pbtxt").read_text()
    )
    info = json.loads(cli("ls", target, "--json").stdout)["models"][0]
    assert info["serving"] == [1, 2] and info["live"] == 2
    assert (pub / "1").is_dir()  # --keep 1 never prunes a version that is served
    assert json.loads(cli("verify", target, "--json").stdout)["passed"]

    src = tmp_path / "src3"
    src.mkdir()
    (src / "model.py").write_text(PY_MODEL.replace('"X"', '"A"'))
    (src / "r.yaml").write_text(
        PY_RECIPE.replace("version: 1", "version: 3").replace("name: X", "name: A").lstrip()
        + "version_policy: {latest: 2}\n"
    )
    out3 = tmp_path / "out3"
    assert cli("build", src / "r.yaml", "-o", out3).exit_code == 0
    _fake_verified(cli, out3)
    r = cli("publish", out3, target)
    assert r.exit_code == 7 and "cannot be served side by side" in r.stderr
    assert "versions: 1" in (pub / "config.pbtxt").read_text()  # still serving 1 and 2


def test_version_policy_specific_serves_both_versions_of_one_build(cli, tmp_path):
    """Two recipes of one model (versions 1 and 2) with version_policy specific [1, 2], built into one OUT."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.py").write_text(PY_MODEL)
    for v in (1, 2):
        (src / f"r{v}.yaml").write_text(
            PY_RECIPE.replace("version: 1", f"version: {v}").lstrip()
            + "version_policy: {specific: [1, 2]}\n"
        )
    out = tmp_path / "out"
    assert cli("build", src / "r1.yaml", src / "r2.yaml", "-o", out).exit_code == 0
    _fake_verified(cli, out)
    target = f"file://{tmp_path}/pub"
    assert cli("publish", out, target).exit_code == 0
    info = json.loads(cli("ls", target, "--json").stdout)["models"][0]
    assert info["serving"] == [1, 2] and info["complete"] == [1, 2]


def test_a_built_repository_copied_to_a_prefix_is_named_as_such(cli, repo, tmp_path):
    """A prefix holding a build's tritonbuild-manifest.json (OUT copied with 'aws s3 sync'): ls, serve and publish
    failed with a pydantic error count; they say what the file is and what to do."""
    out = repo(1)
    for command in (["ls", f"file://{out}"], ["serve", f"file://{out}", "--http-port", "0"]):
        r = cli(*command)
        assert r.exit_code == 7, r.stderr
        assert "is a build manifest" in r.stderr and "validation error" not in r.stderr
        assert "tritonbuild publish OUT URL" in r.stderr and "tritonbuild serve OUT" in r.stderr


@pytest.mark.parametrize("verb", ["ls", "rollback", "verify", "publish"])
def test_a_target_url_with_an_unknown_scheme_is_refused_where_the_cli_receives_it(cli, repo, verb):
    url = "ftp://host/models"
    args = {"ls": [url], "verify": [url], "rollback": [url, "doubler", "--to", "1"]}.get(verb) or [
        repo(1),
        url,
    ]
    r = cli(verb, *args)
    assert r.exit_code == 7, r.output
    assert "unsupported target scheme 'ftp'" in r.stderr and "s3://bucket/prefix" in r.stderr
    assert "Traceback" not in r.stderr


def _snapshot(root) -> dict:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_changed_config_parameter_without_a_version_bump_is_refused(cli, tmp_path):
    """Issue 43: a config parameter changed without a version bump said 'doubler v1 unchanged, already published,
    identical' and rewrote the live config.pbtxt, leaving config-v1.pbtxt (what rollback restores) and the golden on
    the old state. The published identity covers the whole config: refused, exit 7, nothing at the target changed."""
    target = f"file://{tmp_path}/pub"

    def build(value: str):
        src = tmp_path / f"src-{value}"
        src.mkdir()
        (src / "model.py").write_text(PY_MODEL)
        recipe = PY_RECIPE.lstrip() + f'parameters: {{scale: "{value}"}}\n'
        (src / "r.yaml").write_text(recipe)
        out = tmp_path / f"repo-{value}"
        assert cli("build", src / "r.yaml", "-o", out).exit_code == 0
        _fake_verified(cli, out)
        return out

    assert cli("publish", build("2"), target).exit_code == 0
    before = _snapshot(tmp_path / "pub")
    r = cli("publish", build("3"), target)
    assert r.exit_code == 7, r.stdout + r.stderr
    assert "already published with another config.pbtxt (parameters['scale'] differ)" in r.stderr
    assert "bump 'version'" in r.stderr and "unchanged" not in r.stdout
    assert _snapshot(tmp_path / "pub") == before


ENSEMBLE = """
name: twice
version: {version}
backend: ensemble
max_batch_size: 4
inputs: [{{name: IN, dtype: fp32, dims: [3]}}]
outputs: [{{name: OUT, dtype: fp32, dims: [3]}}]
steps:
  - model: doubler
    inputs: {{X: IN}}
    outputs: {{Y: mid}}
  - model: doubler
    inputs: {{X: mid}}
    outputs: {{Y: OUT}}
"""


def _build_twice(cli, tmp_path, tag: str, step_version: int, factor: str, ensemble_version: int):
    """The doubler step (its version and factor) and the `twice` ensemble over it, built and marked verified."""
    src = tmp_path / f"src-{tag}"
    src.mkdir()
    (src / "model.py").write_text(PY_MODEL)
    recipe = PY_RECIPE.replace("version: 1", f"version: {step_version}").lstrip()
    (src / "r.yaml").write_text(recipe + f'parameters: {{factor: "{factor}"}}\n')
    (src / "twice.yaml").write_text(ENSEMBLE.format(version=ensemble_version).lstrip())
    out = tmp_path / f"repo-{tag}"
    r = cli("build", src / "r.yaml", src / "twice.yaml", "-o", out)
    assert r.exit_code == 0, r.stderr
    _fake_verified(cli, out)
    return out


def test_a_changed_step_under_an_unbumped_ensemble_is_refused(cli, tmp_path):
    """Issue 43: a changed ensemble step left 'twice v1 unchanged, identical' at the target, its goldens recorded on
    the old step, and the readiness probe failed on every pod. The ensemble's published identity covers its steps':
    a step changed (bumped; its config alone, which entered no identity before) under the same ensemble version is
    refused, naming the step; with the ensemble bumped too it publishes."""
    target = f"file://{tmp_path}/pub"

    def build(tag: str, step_version: int, factor: str, ensemble_version: int):
        return _build_twice(cli, tmp_path, tag, step_version, factor, ensemble_version)

    assert cli("publish", build("a", 1, "2", 1), target).exit_code == 0
    published = json.loads((tmp_path / "pub" / "tritonbuild-manifest.json").read_text())["models"]
    assert list(published["twice"]["versions"]["1"]["steps_identity"]) == ["doubler"]
    assert "steps_identity" not in published["doubler"]["versions"]["1"]
    before = _snapshot(tmp_path / "pub")
    r = cli("publish", build("b", 2, "3", 1), target)
    assert r.exit_code == 7, r.stdout + r.stderr
    assert (
        "twice version 1 is already published with other models under it (doubler changed"
        in r.stderr
    )
    assert "bump 'version'" in r.stderr
    assert _snapshot(tmp_path / "pub") == before
    alone = tmp_path / "repo-step-alone"  # the changed step from a build without the ensemble
    r = cli("build", tmp_path / "src-b" / "r.yaml", "-o", alone)
    assert r.exit_code == 0, r.stderr
    _fake_verified(cli, alone)
    r = cli("publish", alone, target)
    assert r.exit_code == 7, r.stdout + r.stderr
    assert "twice version 1 at the target calls doubler, which this publish changes" in r.stderr
    assert _snapshot(tmp_path / "pub") == before
    r = cli("publish", build("c", 2, "3", 2), target, "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    same = build("d", 2, "3", 2)  # the same step and ensemble again: unchanged, identical
    r = cli("publish", same, target, "--json")
    assert r.exit_code == 0 and {a["action"] for a in json.loads(r.stdout)["actions"]} == {
        "unchanged"
    }


def test_a_step_rolled_back_under_its_ensemble_is_refused_unless_rolled_back_together(
    cli, tmp_path
):
    """Issue 43: rolling back a step alone left the ensemble serving with goldens recorded on the other step
    version (its readiness probe fails on every pod). Refused before anything is written, naming the ensemble and
    the command that rolls both back together; --also does it, one manifest write; the ensemble rolled forward
    alone is refused the same way."""
    target = f"file://{tmp_path}/pub"

    def build(tag: str, step_version: int, factor: str, ensemble_version: int):
        return _build_twice(cli, tmp_path, tag, step_version, factor, ensemble_version)

    assert cli("publish", build("a", 1, "2", 1), target).exit_code == 0
    assert cli("publish", build("b", 2, "3", 2), target).exit_code == 0
    manifest = tmp_path / "pub" / "tritonbuild-manifest.json"
    assert sorted(json.loads(manifest.read_text())["models"]["twice"]["versions"]) == ["1", "2"]
    before = _snapshot(tmp_path / "pub")
    r = cli("rollback", target, "doubler", "--to", "1")
    assert r.exit_code == 7, r.stdout + r.stderr
    said = " ".join(r.stderr.split())
    assert "twice version 2 calls doubler (would serve version 1)" in said
    assert "nothing at the target was changed" in said
    assert f"tritonbuild rollback {target} doubler --to 1 --also twice=1" in said
    assert "Traceback" not in r.stderr and _snapshot(tmp_path / "pub") == before
    r = cli(
        "rollback", target, "twice", "--to", "1"
    )  # the ensemble alone: its goldens are on doubler v1
    assert r.exit_code == 7 and "--also doubler=1" in " ".join(r.stderr.split()), r.stderr
    assert _snapshot(tmp_path / "pub") == before
    r = cli("rollback", target, "doubler", "--to", "1", "--also", "twice=1", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert (result["live"], result["previous"]) == (1, 2)
    assert [(row["model"], row["live"], row["previous"]) for row in result["also"]] == [
        ("twice", 1, 2)
    ]
    live = {name: m["live"] for name, m in json.loads(manifest.read_text())["models"].items()}
    assert live == {"doubler": 1, "twice": 1}
    r = cli(
        "rollback", target, "doubler", "--to", "2"
    )  # forward alone: twice v1 was verified on doubler v1
    assert r.exit_code == 7 and "--also twice=2" in " ".join(r.stderr.split()), r.stderr
    r = cli("rollback", target, "twice", "--to", "2", "--also", "doubler=2")
    assert r.exit_code == 0 and "twice: live version 1 → 2" in r.stdout, r.stdout + r.stderr
    assert "doubler: live version 1 → 2" in r.stdout
    r = cli("rollback", target, "twice", "--to", "1", "--also", "doubler")
    assert r.exit_code == 2 and "expected MODEL=N" in r.stderr


def test_publish_and_ls_say_which_manifest_digest_they_print(cli, repo, tmp_path):
    """Issue 43: publish printed the repository manifest's digest and ls the target manifest's, both as 'manifest',
    two different values without a word on which is which."""
    target = f"file://{tmp_path}/pub"
    out = repo(1)
    _fake_verified(cli, out)
    r = cli("publish", out, target)
    assert r.exit_code == 0 and "published repository manifest " in r.stdout, r.stdout
    assert "'ls' shows the target's own" in " ".join(r.stdout.split())
    r = cli("ls", target)
    assert "target manifest sha256: " in r.stdout
    assert "not the repository manifest publish names" in " ".join(r.stdout.split())
