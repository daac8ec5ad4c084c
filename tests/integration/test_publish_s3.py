"""Publish against a real S3 protocol endpoint (moto_server) and a real tritonserver reading from it."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest

from tests.integration.conftest import FAKE_KEY_ID, FAKE_SECRET, kill_in_stratum, work_span
from tests.serving import TRAFFIC_GAP_S, serve_json, stop_serve
from tritonbuild import api
from tritonbuild.core.progress import Reporter
from tritonbuild.server.embedded import EmbeddedServer

pytestmark = [pytest.mark.s3, pytest.mark.slow]


def _infer(http_url: str, x: list[float]) -> tuple[str, list[float]]:
    body = json.dumps(
        {"inputs": [{"name": "X", "shape": [1, 3], "datatype": "FP32", "data": x}]}
    ).encode()
    req = urllib.request.Request(
        f"http://{http_url}/v2/models/doubler/infer", data=body, method="POST"
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        doc = json.loads(r.read())
    return doc["model_version"], doc["outputs"][0]["data"]


def _expected(factor: float, x=(1.0, 2.0, 3.0)) -> list[float]:
    return (np.asarray(x, np.float32) * np.float32(factor) + np.float32(1)).tolist()


def _tb(*args, check=True, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(
        [sys.executable, "-m", "tritonbuild", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ},
        **kw,
    )
    if check:
        assert r.returncode == 0, r.stderr
    return r


@pytest.mark.triton
def test_publish_to_s3_and_serve_from_it(doubler_repo, bucket):
    out = doubler_repo(1)
    receipt = api.publish(out, f"s3://{bucket}/models/prod")
    assert receipt.verification == "passed" and receipt.uploaded_bytes > 0
    assert (
        receipt.triton_url
        == f"s3://{os.environ['AWS_ENDPOINT_URL']}/{bucket}/models/prod".replace(
            "s3://http://", "s3://http://"
        )
    )
    assert api.verify_target(f"s3://{bucket}/models/prod").passed
    with EmbeddedServer(receipt.triton_url) as server:
        server.load("doubler")
        version, y = _infer(server.http_url, [1, 2, 3])
    assert (version, y) == ("1", _expected(2))
    # idempotent: a second publish uploads nothing
    again = api.publish(out, f"s3://{bucket}/models/prod")
    assert again.uploaded_bytes == 0 and {a.action for a in again.actions} == {"unchanged"}


class _Marks(Reporter):
    def __init__(self):
        self.uploaded_at = None

    def end_transfer(self):
        self.uploaded_at = time.monotonic()


@pytest.mark.triton
def test_live_switch_in_poll_mode_has_no_failed_request(doubler_repo, bucket):
    target = f"s3://{bucket}/live"
    v1 = doubler_repo(1, factor="2")
    v2 = doubler_repo(2, factor="3", extra=os.urandom(12 << 20))
    receipt = api.publish(v1, target)
    seen, failures, stop = [], [], threading.Event()
    with EmbeddedServer(receipt.triton_url, control="poll", poll_secs=1) as server:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                _infer(server.http_url, [1, 2, 3])
                break
            except Exception:  # noqa: BLE001 - still loading
                time.sleep(0.2)

        def client():
            while not stop.wait(TRAFFIC_GAP_S):
                try:
                    seen.append((time.monotonic(), *_infer(server.http_url, [1, 2, 3])))
                except Exception as e:  # noqa: BLE001
                    failures.append(repr(e))

        threads = [threading.Thread(target=client) for _ in range(2)]
        for t in threads:
            t.start()
        marks = _Marks()
        time.sleep(1.0)
        api.publish(v2, target, reporter=marks)
        switch_deadline = time.monotonic() + 30
        while time.monotonic() < switch_deadline and not (seen and seen[-1][1] == "2"):
            time.sleep(0.2)
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join()
    assert failures == []
    assert len(seen) > 50
    by_version = {"1": _expected(2), "2": _expected(3)}
    assert all(y == by_version[v] for _, v, y in seen)
    first_v2 = min(t for t, v, _ in seen if v == "2")
    assert marks.uploaded_at is not None and first_v2 > marks.uploaded_at
    assert seen[-1][1] == "2"


def _publish_proc(repo, target: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tritonbuild",
            "publish",
            str(repo),
            target,
            "--skip-verify",
            "--keep",
            "3",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )


@pytest.mark.triton
def test_killed_publishes_never_expose_a_half_version(doubler_repo, bucket, monkeypatch):
    """Ten seeded kills, one in each tenth of a publish's own work (from its lease on: kill_in_stratum): the
    polling server keeps serving a complete version, ls shows no half version as live, and a re-run completes."""
    from tritonbuild.publish.target import open_target

    # --keep 3 prunes in every publish here (a kill lands in the prune too): the grace after a switch would
    # defer each prune past the test (the publishes are seconds apart)
    monkeypatch.setenv("TRITONBUILD_PRUNE_GRACE_S", "0")

    target, kills = f"s3://{bucket}/crash", 10
    factors = {v: float(v + 1) for v in range(1, kills + 2)}
    repos = {1: doubler_repo(1, factor="2", verify=False, extra=os.urandom(4 << 20))}
    opened = open_target(
        target
    )  # v1 by a publish like the killed ones: how long its work takes here and now
    span = work_span(_publish_proc(repos[1], target), opened)
    with EmbeddedServer(opened.triton_url(), control="poll", poll_secs=1) as server:
        served = []
        for run, version in enumerate(range(2, kills + 2)):
            repos[version] = doubler_repo(
                version, factor=str(factors[version]), verify=False, extra=os.urandom(4 << 20)
            )
            proc = _publish_proc(repos[version], target)
            kill_in_stratum(proc, opened, span, run, kills, random.Random(run))
            info = api.list_target(target).models[0].to_dict()
            live = info["live"]
            assert live is not None and live in info["present"], info
            assert live in info["complete"] or _complete_on_target(target, repos[live]), (run, info)
            time.sleep(1.2)  # one poll
            v, y = _infer(server.http_url, [1, 2, 3])
            assert y == _expected(factors[int(v)]) and int(v) in info["present"], (run, v, info)
            served.append(int(v))
            api.publish(repos[version], target, skip_verify=True, keep=3)
            info = api.list_target(target).models[0].to_dict()
            assert info["live"] == version and info["notes"] == [], info
        assert json.loads(_tb("verify", target, "--json").stdout)["passed"]
    assert len(served) == kills


def _complete_on_target(target: str, repo) -> bool:
    """Every file of repo's version is at the target with its size (killed after the switch, before the
    manifest write: the version is complete though not yet recorded)."""
    from tritonbuild.publish import objects
    from tritonbuild.publish.target import open_target
    from tritonbuild.repository.manifest import read_manifest

    m = read_manifest(repo)
    t = open_target(target)
    (model,) = m.models
    remote = objects.remote_sizes(t, t.path(model.name))
    prefix = f"{model.name}/"
    return all(
        remote.get(k[len(prefix) :]) == e.size
        for k, e in m.files.items()
        if k.startswith(f"{model.name}/{model.version}/")
    )


def test_two_concurrent_publishes_one_wins(doubler_repo, bucket, s3fs_client):
    """A second publish while the first holds the target's lease exits 7 and changes nothing; the first ends well.
    The overlap is made certain (not left to the scheduler, which on a loaded machine let the first finish before
    the second started): the first is frozen (SIGSTOP) once its lease object exists, the second runs to its end,
    then the first resumes."""
    target = f"s3://{bucket}/race"
    a = doubler_repo(1, factor="2", verify=False, extra=os.urandom(24 << 20))
    b = doubler_repo(2, factor="3", verify=False, extra=os.urandom(24 << 20))
    env = {
        **os.environ,
        "TRITONBUILD_LOCK_LEASE_S": "600",
    }  # the frozen holder's lease outlives the test
    first = subprocess.Popen(
        [sys.executable, "-m", "tritonbuild", "publish", str(a), target, "--skip-verify"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lock = f"{bucket}/race/tritonbuild.lock"
    deadline = time.monotonic() + 120
    while not s3fs_client.exists(lock):
        s3fs_client.invalidate_cache()
        assert first.poll() is None, (
            "the first publish ended before its lease was seen",
            first.communicate(),
        )
        assert time.monotonic() < deadline, "the first publish never created its lease"
        time.sleep(0.02)
    os.kill(first.pid, signal.SIGSTOP)
    try:
        second = subprocess.run(
            [sys.executable, "-m", "tritonbuild", "publish", str(b), target, "--skip-verify"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
    finally:
        os.kill(first.pid, signal.SIGCONT)
    _, first_err = first.communicate(timeout=300)
    assert (first.returncode, second.returncode) == (0, 7), (first_err, second.stderr)
    assert "another publish to this target is in progress" in second.stderr
    info = json.loads(_tb("ls", target, "--json").stdout)["models"][0]
    assert info["notes"] == [] or all("incomplete" in n for n in info["notes"])
    assert info["live"] == 1 and info["live"] in info["complete"]
    assert json.loads(_tb("verify", target, "--json").stdout)["passed"]


def _objects(fs, bucket) -> dict[str, bytes]:
    return {p: fs.cat_file(p) for p in fs.find(bucket)}


@pytest.mark.parametrize("case", ["missing-bucket", "no-credentials", "unreachable", "bad-url"])
def test_target_errors_exit_7_and_change_nothing(
    doubler_repo, bucket, s3fs_client, case, monkeypatch
):
    out = doubler_repo(1, verify=False)
    before = _objects(s3fs_client, bucket)
    target = f"s3://{bucket}/p"
    env = {**os.environ}
    if case == "missing-bucket":
        target = "s3://no-such-bucket-tb/p"
    elif case == "no-credentials":
        for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            env.pop(var)
        env.update(
            AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
            AWS_CONFIG_FILE="/nonexistent",
            AWS_EC2_METADATA_DISABLED="true",
        )
    elif case == "unreachable":
        env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"
    else:
        target = "s3:/bucket-without-slashes"
    r = subprocess.run(
        [sys.executable, "-m", "tritonbuild", "publish", str(out), target, "--skip-verify"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 7, r.stderr
    assert "Traceback" not in r.stderr and "fix:" in r.stderr
    assert _objects(s3fs_client, bucket) == before
    assert FAKE_SECRET not in r.stderr + r.stdout


def test_secrets_never_appear_in_output_or_target(doubler_repo, bucket, s3fs_client):
    out = doubler_repo(1)
    target = f"s3://{bucket}/sec"
    texts = []
    for args in (
        ["publish", out, target, "--json"],
        ["ls", target, "--json"],
        ["verify", target, "--json"],
        ["publish", out, target],
        ["rollback", target, "doubler", "--to", "9"],
    ):
        r = _tb(*args, check=False)
        texts += [r.stdout, r.stderr]
    blobs = _objects(s3fs_client, bucket)
    for secret in (FAKE_SECRET, FAKE_KEY_ID):
        assert not any(secret in t for t in texts)
        assert not any(secret.encode() in b for b in blobs.values())
    assert any(p.endswith("tritonbuild-manifest.json") for p in blobs)


@pytest.mark.triton
def test_serve_a_published_target_and_notify_an_explicit_server(doubler_repo, bucket):
    target = f"s3://{bucket}/served"
    out = doubler_repo(1)
    api.publish(out, target)
    proc, info = serve_json(target)
    try:
        assert info["loaded"] == ["doubler"] and info["repository"].startswith(
            "s3://http://127.0.0.1:"
        )
        assert _infer(info["http"].removeprefix("http://"), [1, 2, 3]) == ("1", _expected(2))
        # the running server is in explicit mode: publish v2 and ask it to load
        v2 = doubler_repo(2, factor="3")
        r = _tb("publish", v2, target, "--notify", info["http"], "--json")
        notified = json.loads(r.stdout)["notified"]
        assert notified == [
            {
                "server": info["http"],
                "model": "doubler",
                "ok": True,
                "status": 200,
                "message": "loaded",
            }
        ]
        assert _infer(info["http"].removeprefix("http://"), [1, 2, 3]) == ("2", _expected(3))
        # unchanged and READY in the server's repository index: no load request
        assert (
            json.loads(_tb("publish", v2, target, "--notify", info["http"], "--json").stdout)[
                "notified"
            ]
            == []
        )
        from tritonclient.http import InferenceServerClient

        client = InferenceServerClient(info["http"].removeprefix("http://"))
        client.unload_model(
            "doubler"
        )  # the server no longer has it: an unchanged publish does not touch it (issue 43, item 4)
        deadline = time.monotonic() + 30
        while client.is_model_ready("doubler") and time.monotonic() < deadline:
            time.sleep(0.2)
        again = json.loads(_tb("publish", v2, target, "--notify", info["http"], "--json").stdout)[
            "notified"
        ]
        # listed as not asked while Triton still holds it (UNLOADING), not listed once it is gone
        assert all(n["ok"] and n["message"].startswith("not asked for 'doubler'") for n in again)
        assert not client.is_model_ready("doubler")
        client.load_model("doubler")  # the operator's reload, as docs/howto/publish.md says
        client.close()
        assert _infer(info["http"].removeprefix("http://"), [1, 2, 3]) == ("2", _expected(3))
        v3 = doubler_repo(
            3, factor="4"
        )  # a change: notify goes only to models this publish changed
        bad = _tb("publish", v3, target, "--notify", "http://127.0.0.1:9", check=False)
        assert bad.returncode == 7 and "did not load" in bad.stderr
        assert stop_serve(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_serve_opens_a_published_target_once(doubler_repo, bucket, monkeypatch):
    """serve reads what it may load through the target it opened: one open (and one reach of the bucket)."""
    from tritonbuild.publish import protocol

    target = f"s3://{bucket}/served-once"
    api.publish(doubler_repo(1, verify=False), target, skip_verify=True)
    opened, real = [], protocol.open_target
    monkeypatch.setattr(
        protocol,
        "open_target",
        lambda *args, **kwargs: opened.append(args) or real(*args, **kwargs),
    )
    serving = api.serve(target)
    server, loadable, not_loadable = serving.server, serving.loadable, serving.not_loadable
    assert len(opened) == 1 and loadable == ["doubler"] and not_loadable == []
    assert server.repository.startswith("s3://http://127.0.0.1:") and server.repository.endswith(
        "/served-once"
    )


def test_serve_an_s3_prefix_holding_a_built_repository_names_it(doubler_repo, bucket, s3fs_client):
    """OUT copied to S3 as it is ('aws s3 sync OUT s3://...'): serve failed with a pydantic error count."""
    out = doubler_repo(1, verify=False)
    s3fs_client.put(str(out), f"{bucket}/synced", recursive=True)
    r = _tb("serve", f"s3://{bucket}/synced", "--http-port", "0", check=False, timeout=120)
    assert r.returncode == 7, r.stderr
    assert (
        "is a build manifest" in r.stderr
        and "validation error" not in r.stderr
        and "Traceback" not in r.stderr
    )
    assert "tritonbuild publish OUT URL" in r.stderr
