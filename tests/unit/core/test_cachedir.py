"""The build cache directory is passed, never ambient: resolve() takes the explicit directory, else the
environment's; no module keeps one in a ContextVar or any other scope the caller cannot see."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT
from tritonbuild.core import cachedir


def test_explicit_directory_wins_over_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITONBUILD_CACHE_DIR", str(tmp_path / "env"))
    assert cachedir.resolve(tmp_path / "given") == tmp_path / "given"
    assert cachedir.resolve() == tmp_path / "env"
    monkeypatch.delenv("TRITONBUILD_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cachedir.resolve() == tmp_path / "xdg" / "tritonbuild"


def test_no_module_keeps_state_in_a_context_variable():
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted((ROOT / "builder").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Name | ast.Attribute)
        and (getattr(node, "id", None) or node.attr) == "ContextVar"
    ]
    assert found == []


def test_a_plan_hashes_its_inputs_into_the_cache_dir_it_is_given(tmp_path, py_recipe):
    from tritonbuild import api

    for name in ("a", "b"):
        api.plan([py_recipe], cache_dir=tmp_path / name)
        assert Path(tmp_path / name / "file-hashes.json").is_file()
