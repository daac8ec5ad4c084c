"""The publish side on file:// targets: tampered bytes never leave, forged or foreign reports are refused (with
a key set or not), a file where a target should be, --keep out of range, a target config that does not parse,
leftovers of a killed publish."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_publish import _fake_verified, repo  # noqa: F401 - the fixture
from tritonbuild.core.hashing import pretty_json
from tritonbuild.repository.manifest import REPORT_NAME


def _flip_bit(path, offset: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_bit_flipped_after_verify_is_never_published(cli, repo, tmp_path):
    out = repo(1)
    _fake_verified(cli, out)  # the PASSED report stays, its manifest digest still matches
    _flip_bit(out / "doubler" / "1" / "model.py", 10)
    r = cli("publish", out, f"file://{tmp_path}/pub")
    assert r.exit_code == 7, r.stderr
    assert (
        "doubler/1/model.py changed since the build" in r.stderr
        and "nothing was written" in r.stderr
    )
    assert not (tmp_path / "pub").exists()


def test_an_edited_config_after_verify_is_never_published(cli, repo, tmp_path):
    out = repo(1)
    _fake_verified(cli, out)
    cfg = out / "doubler" / "config.pbtxt"
    cfg.write_text(cfg.read_text().replace("max_batch_size: 4", "max_batch_size: 8"))
    r = cli("publish", out, f"file://{tmp_path}/pub")
    assert r.exit_code == 7 and "doubler/config.pbtxt" in r.stderr
    assert not (tmp_path / "pub").exists()


def _report(out) -> dict:
    return json.loads((out / REPORT_NAME).read_text())


def test_a_failed_report_edited_to_passed_is_refused_when_a_report_key_is_set(
    cli, repo, tmp_path, monkeypatch
):
    monkeypatch.setenv("TRITONBUILD_REPORT_KEY", "ci-secret-1")
    out = repo(1)
    (out / "doubler" / "1" / "extra.txt").write_text("not in the manifest\n")
    assert cli("verify", out, "--json").exit_code == 6  # static failure: FAILED report, signed
    (out / "doubler" / "1" / "extra.txt").unlink()
    doc = _report(out)
    assert doc["passed"] is False and doc["signature"].startswith("hmac-sha256:")
    doc["passed"] = True  # the forgery
    (out / REPORT_NAME).write_bytes(pretty_json(doc))
    r = cli("publish", out, f"file://{tmp_path}/pub")
    assert (
        r.exit_code == 7
        and "does not match its signature" in r.stderr
        and "TRITONBUILD_REPORT_KEY" in r.stderr
    )
    # a report nobody signed is refused too, and a report signed with another key
    del doc["signature"]
    (out / REPORT_NAME).write_bytes(pretty_json(doc))
    r = cli("publish", out, f"file://{tmp_path}/pub")
    assert r.exit_code == 7 and "is not signed" in r.stderr
    assert not (tmp_path / "pub").exists()


def test_an_edited_or_foreign_report_never_publishes_with_no_key_set(
    cli, repo, tmp_path, monkeypatch
):
    """The default pipeline (no TRITONBUILD_REPORT_KEY): verify signs with this machine's key, and publish
    refuses a FAILED report edited to PASSED, a report signed under another machine's key, and, with no key at
    all, any report."""
    from tritonbuild.core.signing import key_file

    monkeypatch.delenv("TRITONBUILD_REPORT_KEY", raising=False)
    out = repo(1)
    (out / "doubler" / "1" / "extra.txt").write_text("not in the manifest\n")
    assert cli("verify", out, "--json").exit_code == 6  # static failure: a FAILED report
    (out / "doubler" / "1" / "extra.txt").unlink()
    assert key_file().is_file() and oct(key_file().stat().st_mode & 0o777) == "0o600"
    doc = _report(out)
    doc["passed"] = True  # the forgery: same manifest digest, verdict flipped
    (out / REPORT_NAME).write_bytes(pretty_json(doc))
    r = cli("publish", out, f"file://{tmp_path}/pub")
    assert (
        r.exit_code == 7 and "does not match its signature with this machine's key" in r.stderr
    ), r.stderr
    assert "--reverify" in r.stderr and "TRITONBUILD_REPORT_KEY" in r.stderr
    _fake_verified(cli, out)  # a genuine PASSED report, signed here ...
    key_file().write_text(
        "another machine's key\n"
    )  # ... then checked under another key: a copied report
    r = cli("publish", out, f"file://{tmp_path}/pub")
    assert r.exit_code == 7 and "does not match its signature" in r.stderr
    key_file().unlink()
    r = cli("publish", out, f"file://{tmp_path}/pub")
    assert r.exit_code == 7 and "cannot be checked: no key here" in r.stderr
    assert not (tmp_path / "pub").exists()


def test_a_report_signed_with_the_key_publishes(cli, repo, tmp_path, monkeypatch):
    from tritonbuild.repository.manifest import read_manifest
    from tritonbuild.verify.models import VerificationReport

    out = repo(1)
    monkeypatch.setenv("TRITONBUILD_REPORT_KEY", "ci-secret-1")
    report = VerificationReport(
        manifest_digest=read_manifest(out).digest, toolchain={}, static=[], models=[], passed=True
    ).signed()
    (out / REPORT_NAME).write_bytes(pretty_json(report.model_dump(mode="json")))
    assert cli("publish", out, f"file://{tmp_path}/pub").exit_code == 0
    monkeypatch.setenv("TRITONBUILD_REPORT_KEY", "another-key")
    r = cli("publish", out, f"file://{tmp_path}/pub2")
    assert r.exit_code == 7 and "does not match its signature" in r.stderr


def test_publishing_to_a_regular_file_names_the_problem(cli, repo, tmp_path):
    out = repo(1)
    _fake_verified(cli, out)
    (tmp_path / "pub").write_text("a file, not a directory\n")
    r = cli("publish", out, f"file://{tmp_path}/pub")
    assert (
        r.exit_code == 7
        and "is a file, not a directory" in r.stderr
        and "in progress" not in r.stderr
    )
    assert (tmp_path / "pub").read_text() == "a file, not a directory\n"


@pytest.mark.parametrize("keep", ["0", "-3"])
def test_keep_below_one_is_a_usage_error(cli, repo, tmp_path, keep):
    out = repo(1)
    _fake_verified(cli, out)
    r = cli("publish", out, f"file://{tmp_path}/pub", "--keep", keep)
    assert r.exit_code == 2 and "--keep" in r.stderr
    assert not (tmp_path / "pub").exists()


def test_ls_of_a_target_whose_config_does_not_parse_names_the_object(cli, repo, tmp_path):
    out = repo(1)
    _fake_verified(cli, out)
    target = f"file://{tmp_path}/pub"
    assert cli("publish", out, target).exit_code == 0
    (tmp_path / "pub" / "doubler" / "config.pbtxt").write_text("max_batch_size: {{{ not a config\n")
    r = cli("ls", target)
    assert r.exit_code == 7 and "doubler/config.pbtxt" in r.stderr and "Traceback" not in r.stderr


def _lock_doc(expires_in: float, host: str = "ci-runner-9", pid: int = 4242) -> str:
    import time

    from tritonbuild.publish.models import utc_iso

    return json.dumps(
        {
            "holder": f"ci@{host}",
            "host": host,
            "pid": pid,
            "token": "theirs",
            "since": utc_iso(time.time() - 600),
            "expires_at": utc_iso(time.time() + expires_in),
        }
    )


def test_a_live_lease_from_another_host_stops_publish_and_ls_shows_it(cli, repo, tmp_path):
    target = f"file://{tmp_path}/pub"
    (tmp_path / "pub").mkdir()
    (tmp_path / "pub" / "tritonbuild.lock").write_text(_lock_doc(+600))
    out = repo(1)
    _fake_verified(cli, out)
    r = cli("publish", out, target)
    assert (
        r.exit_code == 7
        and "in progress (ci@ci-runner-9 pid 4242" in r.stderr
        and "lease runs until" in r.stderr
    )
    lock = json.loads(cli("ls", target, "--json").stdout)["lock"]
    assert (lock["holder"], lock["pid"], lock["state"]) == (
        "ci@ci-runner-9",
        4242,
        "live",
    ) and lock["expires_at"]
    assert "lock: held by ci@ci-runner-9 pid 4242" in cli("ls", target).stdout


def test_an_expired_lease_of_a_killed_publisher_elsewhere_is_broken(cli, repo, tmp_path):
    target = f"file://{tmp_path}/pub"
    (tmp_path / "pub").mkdir()
    (tmp_path / "pub" / "tritonbuild.lock").write_text(_lock_doc(-5))
    assert json.loads(cli("ls", target, "--json").stdout)["lock"]["state"] == "expired"
    out = repo(1)
    _fake_verified(cli, out)
    r = cli("publish", out, target)
    assert r.exit_code == 0, r.stderr
    # never silently: the log says whose lease was broken and why it could be
    assert "warning: broke the publish lock of ci@ci-runner-9 pid 4242" in r.stderr
    assert (
        "its lease expired at" in r.stderr and "tritonbuild.lock" in r.stdout
    )  # and the receipt's table
    assert not (tmp_path / "pub" / "tritonbuild.lock").exists()
    assert [p.name for p in (tmp_path / "pub").iterdir() if "lock" in p.name] == []
    assert json.loads(cli("ls", target, "--json").stdout)["lock"] is None
    (tmp_path / "pub" / "tritonbuild.lock").write_text(_lock_doc(-5, pid=4343))
    r = cli("rollback", target, "doubler", "--to", "1")
    assert (
        r.exit_code == 0
        and "warning: broke the publish lock of ci@ci-runner-9 pid 4343" in r.stderr
    )


def test_the_lease_is_renewed_while_held_and_a_renewed_lock_is_not_broken(tmp_path, monkeypatch):
    import time

    from tritonbuild.publish.lock import TargetLock, read_lock
    from tritonbuild.publish.models import utc_epoch
    from tritonbuild.publish.target import open_target

    monkeypatch.setenv("TRITONBUILD_LOCK_LEASE_S", "3")
    (tmp_path / "pub").mkdir()
    target = open_target(f"file://{tmp_path}/pub")
    with TargetLock(target) as lock:
        first = utc_epoch(read_lock(target)["expires_at"])
        time.sleep(2.2)
        held = read_lock(target)
        assert (
            held["state"] == "live" and utc_epoch(held["expires_at"]) > first
        )  # the heartbeat renewed it
        lock.check_held()
        # a breaker that judged an older body expired must not remove the renewed lock
        other = TargetLock(target)
        assert other._break(b'{"token": "an older body"}', None) is False
        assert read_lock(target)["token"] == lock.token
    assert read_lock(target) is None


def test_a_lock_create_whose_first_attempt_landed_is_ours_not_another_publish(
    tmp_path, monkeypatch
):
    """A store client retries a create whose answer was lost (gcsfs and botocore do, e.g. after a read timeout
    while the publisher was stopped): the retry meets the lock the first attempt wrote, with this publisher's own
    token. That is this publisher's lock, not "another publish in progress" (it refused itself)."""
    from tritonbuild.core.leases import LocalLease
    from tritonbuild.publish.lock import TargetLock, read_lock
    from tritonbuild.publish.target import open_target

    create = LocalLease.create

    def landed_then_retried(self, body):
        create(self, body)
        raise FileExistsError(
            self.path
        )  # the retry's 412: the object exists (it is the first attempt's)

    (tmp_path / "pub").mkdir()
    target = open_target(f"file://{tmp_path}/pub")
    monkeypatch.setattr(LocalLease, "create", landed_then_retried)
    with TargetLock(target) as lock:
        held = read_lock(target)
        assert held["token"] == lock.token and lock.version is not None
        lock._renew()  # the version it adopted is the one on the store
        lock.check_held()
    assert read_lock(target) is None


def test_a_checkpoint_url_with_credentials_is_not_printed(cli, tmp_path):
    import shutil

    from tests.conftest import EXAMPLES

    shutil.copy(EXAMPLES / "tiny-llama-int4.yaml", tmp_path / "llm.yaml")
    text = (tmp_path / "llm.yaml").read_text()
    (tmp_path / "llm.yaml").write_text(
        text.replace(
            "checkpoint: {path: tiny-llama}",
            "checkpoint: {path: 's3://AKIAKEY:ckptSECRETvalue@bucket/ck'}",
        )
    )
    r = cli("plan", tmp_path / "llm.yaml")
    assert r.exit_code == 4, r.stderr
    assert "ckptSECRETvalue" not in r.stdout + r.stderr and "s3://***@bucket/ck" in r.stderr


def _wait_stopped(pid: int) -> None:
    """Until the kernel reports pid stopped (state T in /proc/PID/stat): a publisher still on a CPU
    just after SIGSTOP could finish a rename after the temporary was seen (.ci/run, loaded)."""
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                return
        time.sleep(0.001)


def test_a_publish_killed_mid_write_leaves_no_temporary_in_a_model_directory(cli, tmp_path):
    """SIGKILL while a file is being written to a file:// target: the temporary is never inside a model or
    version directory (the tree a polling Triton reads), and the next publish removes it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import PY_MODEL, PY_RECIPE

    src = tmp_path / "src"
    src.mkdir()
    (src / "model.py").write_text(PY_MODEL)
    with open(src / "weights.bin", "wb") as f:  # large enough that its copy takes a moment
        f.truncate(0)
        f.write(os.urandom(1 << 20) * 160)
    recipe = PY_RECIPE.replace(
        "source: {path: model.py}", "source: {path: model.py, files: [weights.bin]}"
    )
    (src / "r.yaml").write_text(recipe.lstrip())
    out = tmp_path / "repo"
    assert cli("build", src / "r.yaml", "-o", out).exit_code == 0
    _fake_verified(cli, out)
    pub = tmp_path / "pub"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tritonbuild", "publish", str(out), f"file://{pub}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def temporaries() -> list[str]:
        return [
            os.path.join(d, n) for d, _, names in os.walk(pub) for n in names if n.endswith(".tmp")
        ]

    # NOTE: a temporary seen, then the publisher stopped (SIGSTOP) and the temporary looked for again: a rename
    # that finished between the two is not a kill mid-write, so the publisher goes on (SIGCONT) and we watch
    # again. The kill then lands while a temporary is there, however loaded the machine.
    seen, deadline = [], time.monotonic() + 60
    while not seen and proc.poll() is None and time.monotonic() < deadline:
        if temporaries():
            proc.send_signal(signal.SIGSTOP)
            _wait_stopped(proc.pid)  # a signal is delivered, not obeyed, when send_signal returns
            seen = temporaries()
            if not seen:
                proc.send_signal(signal.SIGCONT)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert seen, "the publish finished before a temporary was seen: make weights.bin larger"
    left = [
        os.path.relpath(os.path.join(d, n), pub)
        for d, _, names in os.walk(pub)
        for n in names
        if n.endswith(".tmp")
    ]
    assert left and all("/" not in rel for rel in left), (
        left
    )  # at the root, never in doubler/ or doubler/1/
    r = cli("publish", out, f"file://{pub}", "--json")
    assert r.exit_code == 0, r.stderr
    cleaned = {
        a["path"]: a["detail"] for a in json.loads(r.stdout)["actions"] if a["action"] == "clean"
    }
    assert sorted(rel for rel in cleaned if rel.endswith(".tmp")) == sorted(left)
    # the killed publisher's lease is broken, and the receipt says whose and why
    assert (
        f"pid {proc.pid}" in cleaned["tritonbuild.lock"]
        and "no longer exists" in cleaned["tritonbuild.lock"]
    )
    assert not [n for _, _, names in os.walk(pub) for n in names if n.endswith(".tmp")]
    assert (pub / "doubler" / "1" / "weights.bin").stat().st_size == 160 << 20


def test_an_unchanged_repository_is_not_read_again_and_a_touched_file_is(
    cli, repo, tmp_path, monkeypatch
):
    """The publish-time check goes through the stat-keyed file-hash cache: the second publish of the same
    repository reads no file; a file rewritten with its old mtime put back is read again (its ctime moved) and a
    flipped bit in it is still caught."""
    import os

    from tritonbuild.core import hashing

    out = repo(1)
    _fake_verified(cli, out)
    reads = []
    real = hashing.sha256_file
    monkeypatch.setattr(
        hashing, "sha256_file", lambda path: reads.append(os.path.relpath(path, out)) or real(path)
    )
    assert cli("publish", out, f"file://{tmp_path}/pub").exit_code == 0
    assert sorted(reads) == sorted(_manifest_files(out))  # the first check reads every file once
    reads.clear()
    assert cli("publish", out, f"file://{tmp_path}/pub").exit_code == 0
    assert reads == []
    model = out / "doubler" / "1" / "model.py"
    st = model.stat()
    _flip_bit(model, 10)
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime restored: only ctime tells
    r = cli("publish", out, f"file://{tmp_path}/pub")
    assert (
        reads == ["doubler/1/model.py"]
        and r.exit_code == 7
        and "changed since the build" in r.stderr
    )


def _manifest_files(out) -> list[str]:
    from tritonbuild.repository.manifest import read_manifest

    return list(read_manifest(out).files)
