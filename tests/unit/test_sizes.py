"""Sizes one can hold in mind: no function in builder/ over 60 lines, no module over 400."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

SOURCE = ROOT / "builder"


def test_no_function_over_60_lines_and_no_module_over_400():
    long_functions, long_modules = [], []
    for path in sorted(SOURCE.rglob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > 400:
            long_modules.append(path.relative_to(ROOT).as_posix())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                long_functions.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert (long_functions, long_modules) == ([], [])
