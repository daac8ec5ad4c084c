"""The tune package's shape: every function under 60 lines (the search is an object whose phases are methods)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TUNE = Path(__file__).resolve().parents[3] / "builder" / "tune"
LIMIT = 60


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), str(path))
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def test_the_scan_measures_a_function_from_def_to_its_last_line(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f():\n" + "    x = 1\n" * 70 + "\n\nclass C:\n    async def g(self):\n        pass\n"
    )
    assert _functions(sample) == [("f", 71), ("g", 2)]
    assert len(list(TUNE.glob("*.py"))) >= 10


@pytest.mark.parametrize("path", sorted(TUNE.glob("*.py")), ids=lambda path: path.name)
def test_every_function_is_under_60_lines(path: Path):
    long = [
        f"{path.name}: {name} is {lines} lines"
        for name, lines in _functions(path)
        if lines >= LIMIT
    ]
    assert not long, "split it into named steps:\n" + "\n".join(long)
