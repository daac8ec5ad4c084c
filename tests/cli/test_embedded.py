"""embedded install | show: the embedded server's own environment from the command line (exit codes, --json)."""

from __future__ import annotations

import json

from tritonbuild.server import toolenv


def test_show_makes_nothing_and_says_where_it_would_go(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITONBUILD_ENVS_DIR", str(tmp_path / "envs"))
    monkeypatch.setattr(toolenv, "available", lambda *_: None)  # whatever this interpreter has
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
    monkeypatch.setattr(toolenv, "available", lambda *_: None)
    (tmp_path / "wheels").mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    r = cli("embedded", "install")
    assert r.exit_code == 11, r.output
    assert (
        "cannot make the embedded server's environment" in r.stderr and "Traceback" not in r.output
    )
    assert "pip.conf" in r.stderr and "making the embedded tritonserver's environment" in r.stderr
