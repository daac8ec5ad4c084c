"""Names a reader never has to look up: the short names that meant a different type in each file (lr, bm,
mp, pm, pv, mm, m) are not bound anywhere in the package."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "builder"

# what each one held somewhere in the package, and what it is called now
BANNED = {
    "lr": "loaded / loaded_recipe (a LoadedRecipe)",
    "bm": "built (a BuiltModel)",
    "mp": "model_plan (a ModelPlan)",
    "pm": "published (a PublishedModel)",
    "pv": "published_version (a PublishedVersion)",
    "mm": "mismatch (a Mismatch)",
    "m": "model / manifest_model / model_plan / model_report / match ... (what it is)",
}


def _bindings(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every name a function argument, assignment, loop, comprehension, with or except binds."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.arg):
            found.append((node.lineno, node.arg))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found.append((node.lineno, node.name))
    return found


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_scan_sees_the_package_and_each_kind_of_binding():
    assert len(_modules()) > 50
    code = (
        "def f(lr):\n    for bm in x: pass\n    mp = [pm for pm in y]\n    with a as pv: pass\n"
        "    try: pass\n    except E as mm: pass\n    g = lambda m: m\n"
    )
    assert sorted(name for _, name in _bindings(ast.parse(code))) == [
        "bm",
        "g",
        "lr",
        "m",
        "mm",
        "mp",
        "pm",
        "pv",
    ]


@pytest.mark.parametrize("path", _modules(), ids=lambda path: path.relative_to(PACKAGE).as_posix())
def test_no_cryptic_names(path: Path):
    hits = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {name!r} -> {BANNED[name]}"
        for line, name in _bindings(ast.parse(path.read_text(), str(path)))
        if name in BANNED
    ]
    assert not hits, "name what it holds:\n" + "\n".join(hits)


# The tracker's numbers belong in commit messages and CHANGELOG.md: in code they go stale and say nothing.
ISSUE_REF = re.compile(r"\((?:issue )?#\d+\b|\bissue #\d+|\bIssue #\d+")


def test_no_issue_numbers_in_code_or_test_names():
    root = PACKAGE.parent
    sources = [*sorted(PACKAGE.rglob("*.py")), *sorted((root / "tests").rglob("*.py"))]
    hits = [
        f"{path.relative_to(root)}:{n}"
        for path in sources
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if ISSUE_REF.search(line)
    ]
    named = [
        p.name
        for p in (root / "tests").rglob("test_*.py")
        if re.match(r"test_(harden|daily|issue)", p.name)
    ]
    assert (hits, named) == ([], [])
