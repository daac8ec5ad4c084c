"""Sizes one can hold in mind: no function in builder/ over 60 lines, no module over 400, and lines
that fit in 100 columns (the formatter wraps code there; of what it cannot wrap -- pydantic
docstrings that become the schema's descriptions, quoted upstream lines -- under 1 % is left;
issue 33 asked for 5 %, the anchors have 0-4 %). Split by concept when you reach them: a module that
grows past 400 lines becomes a folder of modules named by what each holds (backends/vllm/, tensorrtllm/llmapi/),
never shards cut at the line count."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

SOURCE = ROOT / "builder"


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
    over = sorted(_over_the_rules())
    assert over == [], f"over the size rules (split by concept, not at the line count): {over}"


def test_lines_over_100_columns_are_under_1_percent_of_builder():
    lines = [line for path in SOURCE.rglob("*.py") for line in path.read_text().splitlines()]
    long = [line for line in lines if len(line) > 100]
    assert len(long) / len(lines) <= 0.01, f"{len(long)} of {len(lines)} lines over 100 columns"
