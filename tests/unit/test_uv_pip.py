"""ci/uv_pip.py: uv gets the index settings pip has (ci/test.sh installs the project with it)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import ROOT


def _uv_pip():
    spec = importlib.util.spec_from_file_location("uv_pip", ROOT / "ci" / "uv_pip.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pips_own_merge_of_files_and_variables_is_what_uv_gets(tmp_path, monkeypatch):
    conf = tmp_path / "pip.conf"
    conf.write_text(
        "[global]\nfind-links = /wheels/global\nextra-index-url =\n    file:///one/simple\n"
        "    file:///two/simple\nconstraint = /pins.txt\n[install]\nfind-links = /wheels/install\n"
        "[download]\nindex-url = http://not-for-install/simple\n"
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    for var in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT", "PIP_INDEX_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PIP_CERT", "/ca.pem")
    uv_pip = _uv_pip()
    settings = uv_pip.pip_settings(sys.executable)
    # the install section over [global], a variable over both, another command's section ignored
    assert settings["find-links"] == "/wheels/install"
    assert settings["extra-index-url"].split() == ["file:///one/simple", "file:///two/simple"]
    assert settings["constraint"] == "/pins.txt" and settings["cert"] == "/ca.pem"
    assert settings.get("index-url") != "http://not-for-install/simple"
    args, env = uv_pip.uv_options(settings)
    assert args[:2] == ["--index-strategy", "unsafe-best-match"]  # pip's choice across indexes
    pairs = list(zip(args[2::2], args[3::2], strict=True))
    assert ("--find-links", "/wheels/install") in pairs and ("--constraint", "/pins.txt") in pairs
    assert [v for k, v in pairs if k == "--extra-index-url"] == [
        "file:///one/simple",
        "file:///two/simple",
    ]
    assert env["SSL_CERT_FILE"] == "/ca.pem"


def test_a_pip_setting_uv_cannot_take_is_an_error_not_dropped():
    uv_pip = _uv_pip()
    with pytest.raises(SystemExit, match="prefer-binary"):
        uv_pip.uv_options({"prefer-binary": "1"})
    args, _ = uv_pip.uv_options({"no-index": "true", "index-url": "file:///only/simple"})
    assert "--no-index" in args and "--index-url file:///only/simple" in " ".join(args)


def test_another_environment_is_named_once_and_the_rest_passes_through():
    uv_pip = _uv_pip()
    assert uv_pip.target_python(["-q", "--python", "/v/bin/python", "w.whl"]) == (
        "/v/bin/python",
        ["-q", "w.whl"],
    )
    assert uv_pip.target_python(["--python=/v/bin/python", "w.whl"]) == ("/v/bin/python", ["w.whl"])
    assert uv_pip.target_python(["-e", "."]) == (sys.executable, ["-e", "."])
