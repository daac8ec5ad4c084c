"""Sizes one can hold in mind: no function in builder/ over 60 lines, no module over 400, and lines
that fit in 100 columns (the formatter wraps code there; what it cannot wrap stays under 5 %)."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

SOURCE = ROOT / "builder"

# Over the rules since the code was formatted at 100 columns (issue 33), each to be split; an entry
# that fits again fails the test below until it is removed, so the list only shrinks.
BEING_SPLIT: set[str] = set()


def _over_the_rules() -> set[str]:
    over = set()
    for path in sorted(SOURCE.rglob("*.py")):
        text, name = path.read_text(), path.relative_to(ROOT).as_posix()
        if len(text.splitlines()) > 400:
            over.add(name)
        for node in ast.walk(ast.parse(text)):
            is_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if is_function and node.end_lineno - node.lineno >= 60:
                over.add(f"{name}::{node.name}")
    return over


def test_no_function_over_60_lines_and_no_module_over_400():
    over = _over_the_rules()
    assert (sorted(over - BEING_SPLIT), sorted(BEING_SPLIT - over)) == ([], [])


def test_lines_over_100_columns_are_under_5_percent_of_builder():
    lines = [line for path in SOURCE.rglob("*.py") for line in path.read_text().splitlines()]
    long = [line for line in lines if len(line) > 100]
    assert len(long) / len(lines) <= 0.05, f"{len(long)} of {len(lines)} lines over 100 columns"
