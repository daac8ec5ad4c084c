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


def test_a_target_image_asks_for_its_pythons_environment_and_an_unknown_one_is_refused(
    cli, tmp_path, monkeypatch
):
    """--triton-image (or TRITONBUILD_TRITON_IMAGE) on embedded show and verify: the environment of that
    image's Python minor is the one looked for; an image whose Python is not recorded is a usage error
    (exit 2) before anything runs."""
    monkeypatch.setenv("TRITONBUILD_ENVS_DIR", str(tmp_path / "envs"))
    asked = []
    monkeypatch.setattr(toolenv, "available", lambda minor=None, sources=(): asked.append(minor))
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
