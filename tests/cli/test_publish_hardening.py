"""Issue #14, publish side on file:// targets: tampered bytes never leave, forged reports are refused under a
key, a file where a target should be, --keep out of range, a target config that does not parse."""

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


def test_a_bit_flipped_after_verify_is_never_published(cli, repo, tmp_path):  # noqa: F811
    out = repo(1)
    _fake_verified(cli, out)  # the PASSED report stays, its manifest digest still matches
    _flip_bit(out / "doubler" / "1" / "model.py", 10)
    r = cli("publish", out, f"file://{tmp_path}/pub")
    assert r.exit_code == 7, r.stderr
    assert "doubler/1/model.py changed since the build" in r.stderr and "nothing was written" in r.stderr
    assert not (tmp_path / "pub").exists()


def test_an_edited_config_after_verify_is_never_published(cli, repo, tmp_path):  # noqa: F811
    out = repo(1)
    _fake_verified(cli, out)
    cfg = out / "doubler" / "config.pbtxt"
    cfg.write_text(cfg.read_text().replace("max_batch_size: 4", "max_batch_size: 8"))
    r = cli("publish", out, f"file://{tmp_path}/pub")
    assert r.exit_code == 7 and "doubler/config.pbtxt" in r.stderr
    assert not (tmp_path / "pub").exists()


def _report(out) -> dict:
    return json.loads((out / REPORT_NAME).read_text())


def test_a_failed_report_edited_to_passed_is_refused_when_a_report_key_is_set(cli, repo, tmp_path, monkeypatch):  # noqa: F811
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
    assert r.exit_code == 7 and "does not match its signature" in r.stderr and "TRITONBUILD_REPORT_KEY" in r.stderr
    # a report nobody signed is refused too, and a report signed with another key
    del doc["signature"]
    (out / REPORT_NAME).write_bytes(pretty_json(doc))
    r = cli("publish", out, f"file://{tmp_path}/pub")
    assert r.exit_code == 7 and "is not signed" in r.stderr
    assert not (tmp_path / "pub").exists()


def test_a_report_signed_with_the_key_publishes(cli, repo, tmp_path, monkeypatch):  # noqa: F811
    from tritonbuild.repository.manifest import read_manifest
    from tritonbuild.verify.models import VerificationReport

    out = repo(1)
    monkeypatch.setenv("TRITONBUILD_REPORT_KEY", "ci-secret-1")
    report = VerificationReport(manifest_digest=read_manifest(out).digest, toolchain={}, static=[], models=[],
                                passed=True).signed()
    (out / REPORT_NAME).write_bytes(pretty_json(report.model_dump(mode="json")))
    assert cli("publish", out, f"file://{tmp_path}/pub").exit_code == 0
    monkeypatch.setenv("TRITONBUILD_REPORT_KEY", "another-key")
    r = cli("publish", out, f"file://{tmp_path}/pub2")
    assert r.exit_code == 7 and "does not match its signature" in r.stderr


def test_publishing_to_a_regular_file_names_the_problem(cli, repo, tmp_path):  # noqa: F811
    out = repo(1)
    _fake_verified(cli, out)
    (tmp_path / "pub").write_text("a file, not a directory\n")
    r = cli("publish", out, f"file://{tmp_path}/pub")
    assert r.exit_code == 7 and "is a file, not a directory" in r.stderr and "in progress" not in r.stderr
    assert (tmp_path / "pub").read_text() == "a file, not a directory\n"


@pytest.mark.parametrize("keep", ["0", "-3"])
def test_keep_below_one_is_a_usage_error(cli, repo, tmp_path, keep):  # noqa: F811
    out = repo(1)
    _fake_verified(cli, out)
    r = cli("publish", out, f"file://{tmp_path}/pub", "--keep", keep)
    assert r.exit_code == 2 and "--keep" in r.stderr
    assert not (tmp_path / "pub").exists()


def test_ls_of_a_target_whose_config_does_not_parse_names_the_object(cli, repo, tmp_path):  # noqa: F811
    out = repo(1)
    _fake_verified(cli, out)
    target = f"file://{tmp_path}/pub"
    assert cli("publish", out, target).exit_code == 0
    (tmp_path / "pub" / "doubler" / "config.pbtxt").write_text("max_batch_size: {{{ not a config\n")
    r = cli("ls", target)
    assert r.exit_code == 7 and "doubler/config.pbtxt" in r.stderr and "Traceback" not in r.stderr
