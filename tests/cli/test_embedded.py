"""embedded install | show | prune: the embedded server's own environments from the command line
(exit codes, --json)."""

from __future__ import annotations

import json
from pathlib import Path

from tritonbuild.server import toolenv


def test_show_makes_nothing_and_says_where_it_would_go(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITONBUILD_ENVS_DIR", str(tmp_path / "envs"))
    monkeypatch.setattr(toolenv, "current", lambda *_: None)  # whatever this interpreter has
    r = cli("embedded", "show", "--json")
    assert r.exit_code == 0
    shown = json.loads(r.stdout)
    assert (
        shown["path"] is None and shown["envs_dir"] == str(tmp_path / "envs") and not shown["made"]
    )
    assert not (tmp_path / "envs").exists()
    r = cli("embedded", "show")
    assert (
        r.exit_code == 0
        and "not made yet" in r.stdout
        and "tritonbuild embedded install" in r.stdout
    )


def test_install_that_pip_cannot_serve_is_a_server_start_error_without_traceback(
    cli, tmp_path, monkeypatch
):
    """A real pip with no index and an empty find-links directory: exit 11 (ServerStartError's own code), pip's
    last lines, where pip looks."""
    monkeypatch.setenv("TRITONBUILD_ENVS_DIR", str(tmp_path / "envs"))
    monkeypatch.delenv("TRITONBUILD_EMBEDDED_PACKAGES", raising=False)
    monkeypatch.setattr(toolenv, "current", lambda *_: None)
    (tmp_path / "wheels").mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    r = cli("embedded", "install")
    assert r.exit_code == 11, r.output
    assert (
        "cannot make the embedded server's environment" in r.stderr and "Traceback" not in r.output
    )
    assert "pip.conf" in r.stderr and "making the embedded tritonserver's environment" in r.stderr


def test_a_target_image_asks_for_its_pythons_environment_and_an_unknown_one_is_refused(
    cli, tmp_path, monkeypatch
):
    """--triton-image (or TRITONBUILD_TRITON_IMAGE) on embedded show and verify: the environment of that
    image's Python minor is the one looked for; an image whose Python is not recorded is a usage error
    (exit 2) before anything runs."""
    monkeypatch.setenv("TRITONBUILD_ENVS_DIR", str(tmp_path / "envs"))
    asked = []
    monkeypatch.setattr(toolenv, "current", lambda minor=None: None)
    monkeypatch.setattr(toolenv, "find", lambda minor=None: asked.append(minor))
    r = cli("embedded", "show", "--triton-image", "24.10", "--json")
    shown = json.loads(r.stdout)
    assert r.exit_code == 0 and asked == ["3.10"] and shown["target_python"] == "3.10"
    assert shown["target_image"] == "nvcr.io/nvidia/tritonserver:24.10-py3"
    r = cli("embedded", "show", "--triton-image", "my/own:1")
    assert r.exit_code == 2 and "not an NGC tritonserver image" in r.stderr
    assert "Traceback" not in r.output
    (tmp_path / "repo").mkdir()
    monkeypatch.setenv("TRITONBUILD_TRITON_IMAGE", "nvcr.io/nvidia/tritonserver:99.01-py3")
    r = cli("verify", tmp_path / "repo")
    assert (
        r.exit_code == 2 and "99.01-py3" in r.stderr and "TRITONBUILD_EMBEDDED_PYTHON" in r.stderr
    )


def test_prune_removes_what_was_not_used_for_n_days_and_never_one_being_made(
    cli, tmp_path, monkeypatch
):
    """Environments and mirrors pile up in the envs directory as versions change (CI caches keep
    them): prune removes those whose record was not touched for --unused-days, one never finished,
    and a killed maker's work directory; one whose lock a maker holds stays."""
    import fcntl
    import os
    import time

    envs = tmp_path / "envs"
    monkeypatch.setenv("TRITONBUILD_ENVS_DIR", str(envs))
    old = time.time() - 40 * 86_400

    def made(name: str, used: float | None) -> Path:
        path = envs / name
        (path / "lib").mkdir(parents=True)
        (path / "lib" / "blob").write_bytes(b"x" * 1000)
        if used is not None:
            (path / toolenv.RECORD).write_text("{}")
            os.utime(path / toolenv.RECORD, (used, used))
        return path

    made("embedded-py3.12-aaaaaaaaaaaa", old)
    made("mirror-py3.12-bbbbbbbbbbbb", time.time())
    made("mirror-py3.10-cccccccccccc", None)  # never finished
    os.utime(made(".mirror-py3.10-dddddddddddd-x1", None), (old, old))  # a killed maker's
    made(".mirror-py3.10-eeeeeeeeeeee-x2", None)  # one making now
    made("embedded-py3.10-ffffffffffff", old)
    made("unrelated", old)
    r = cli("embedded", "prune", "--dry-run", "--json")
    dry = json.loads(r.stdout)
    assert r.exit_code == 0 and dry["dry_run"] and dry["freed_bytes"] >= 4000
    assert dry["removed"] == [
        ".mirror-py3.10-dddddddddddd-x1",
        "embedded-py3.10-ffffffffffff",
        "embedded-py3.12-aaaaaaaaaaaa",
        "mirror-py3.10-cccccccccccc",
    ]
    assert (envs / "embedded-py3.12-aaaaaaaaaaaa").is_dir()  # nothing removed
    with open(envs / "embedded-py3.10-ffffffffffff.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a maker at work on it
        done = json.loads(cli("embedded", "prune", "--json").stdout)
    assert done["removed"] == [
        ".mirror-py3.10-dddddddddddd-x1",
        "embedded-py3.12-aaaaaaaaaaaa",
        "mirror-py3.10-cccccccccccc",
    ]
    assert done["kept"] == 2
    assert sorted(p.name for p in envs.iterdir() if p.is_dir()) == [
        ".mirror-py3.10-eeeeeeeeeeee-x2",
        "embedded-py3.10-ffffffffffff",
        "mirror-py3.12-bbbbbbbbbbbb",
        "unrelated",
    ]
    r = cli("embedded", "prune", "--unused-days", "0")
    assert r.exit_code == 0 and "removed 2 from" in r.stdout and "kept 0" in r.stdout
