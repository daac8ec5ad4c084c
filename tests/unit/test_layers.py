"""DESIGN's one-way data flow, enforced: a stage never imports a later stage; core imports no stage."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

RANK = {"core": 0, "errors": 0, "recipe": 1, "plan": 2, "steps": 3, "repository": 4, "server": 5, "verify": 5,
        "publish": 6, "api": 7, "cli": 8}
PLUGINS = "backends"  # used by several stages; may use core, recipe, plan and repository.config, nothing later
PLUGIN_MAX = RANK["repository"]


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tritonbuild."):
            out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("tritonbuild.")}
    return out


MODULES = sorted(p for p in (ROOT / "builder").rglob("*.py") if "models" not in p.parts or p.parent.name != "models")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_import_of_a_later_stage(path):
    rel = path.relative_to(ROOT / "builder")
    own = rel.parts[0].removesuffix(".py")
    if own in ("__init__", "__main__"):
        return
    limit = PLUGIN_MAX if own == PLUGINS else RANK[own]
    for imported in _imports(path) - {own, "cli" if own == "cli" else ""}:
        if imported == PLUGINS:
            assert own != "core", f"{rel}: core must not import {imported}"
            continue
        assert RANK.get(imported, 0) <= limit, f"{rel} ({own}) imports the later stage {imported}"
