"""DESIGN's one-way data flow, enforced: a stage never imports a later stage; core imports no stage; backends
are a layer below the stages (no exemption); no two modules import each other, directly or in a ring; the CLI
imports of tritonbuild only the api package, the errors and itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

# Lower first. triton: Triton's config knowledge (ModelConfig, its rules); backends: the plug-ins every stage asks.
RANK = {
    "core": 0,
    "errors": 0,
    "recipe": 1,
    "triton": 2,
    "backends": 3,
    "plan": 4,
    "steps": 5,
    "repository": 6,
    "server": 7,
    "verify": 7,
    "publish": 8,
    "tune": 8,
    "api": 9,
    "cli": 10,
}
SOURCE = ROOT / "builder"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["tritonbuild", *parts])


# The Python models we ship run inside Triton, not in our process: they are not part of the import graph.
MODULES = {_module_name(p): p for p in sorted(SOURCE.rglob("*.py")) if p.parent.name != "models"}


def _imports(path: Path) -> set[str]:
    """Every tritonbuild module this file imports, at the top or inside a function."""
    return _imports_in(path.read_text())


def _imports_in(source: str) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("tritonbuild")
        ):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in MODULES else node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("tritonbuild")}
    return out


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


@pytest.mark.parametrize("module", sorted(MODULES), ids=str)
def test_no_import_of_a_later_layer(module):
    own = _layer(module)
    if own in ("__init__", "__main__"):
        return
    assert own in RANK, f"{module}: give the new package {own!r} a place in RANK"
    for imported in _imports(MODULES[module]):
        layer = _layer(imported)
        if layer in (own, "__init__"):
            continue
        assert layer in RANK, f"{module} imports {imported}, which has no place in RANK"
        assert RANK[layer] <= RANK[own], (
            f"{module} ({own}) imports the later layer {layer} ({imported})"
        )


# The CLI's edge (ARCHITECTURE: the CLI calls only the api): besides its own modules, a cli module
# imports the api package (which re-exports what options and help texts need) and the errors.
CLI_MAY_IMPORT = ("tritonbuild.api", "tritonbuild.errors")


def outside_the_edge(imported: set[str]) -> list[str]:
    """The tritonbuild modules imported that are neither the api package (not its modules: what the
    CLI needs it re-exports), errors, nor the CLI's own."""
    return sorted(
        name
        for name in imported
        if name not in CLI_MAY_IMPORT and name.split(".")[:2] != ["tritonbuild", "cli"]
    )


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) == "cli"), ids=str)
def test_the_cli_imports_only_the_api_the_errors_and_itself(module):
    """At the top, inside a function or for type checking alike."""
    assert outside_the_edge(_imports(MODULES[module])) == [], (
        f"{module} goes around the api: import it through tritonbuild.api (re-export it there)"
    )


def test_the_edge_check_sees_a_way_around_the_api():
    """Guards against a vacuous pass: an import of a stage, of core, or of an api module is found;
    the api package, errors and the CLI's own modules are not."""
    source = (
        "from tritonbuild import api, errors\nfrom tritonbuild.cli.app import app\n"
        "import tritonbuild.cli.common\nfrom tritonbuild.errors import UsageError\n"
        "def f():\n    from tritonbuild.core.stores import is_url\n"
        "if TYPE_CHECKING:\n    from tritonbuild.api.serving import Serving\n"
        "    from tritonbuild.verify.infer import InferResult\n"
    )
    assert outside_the_edge(_imports_in(source)) == [
        "tritonbuild.api.serving",
        "tritonbuild.core.stores",
        "tritonbuild.verify.infer",
    ]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycles():
    graph = {m: {i for i in _imports(p) if i in MODULES and i != m} for m, p in MODULES.items()}
    assert _cycles(graph) == [], "modules importing each other"


def test_the_checks_see_real_imports_and_rings():
    """Guards against vacuous passes: the parser finds known edges, the cycle finder finds a ring."""
    assert "tritonbuild.backends" in _imports(MODULES["tritonbuild.plan.planner"])
    assert "tritonbuild.repository.manifest" in _imports(MODULES["tritonbuild.verify.run"])
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_importing_the_package_wires_nothing():
    """No import side effect: `import tritonbuild` (and a core module) loads only what it names, not the backend
    registry (the recipe loader gets its kinds passed by api instead)."""
    import subprocess
    import sys

    code = (
        "import sys, tritonbuild.core.hashing; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('tritonbuild'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert loaded == ["tritonbuild", "tritonbuild.core", "tritonbuild.core.hashing"]
