"""The backend-interface reference page (reference/backend-interface.md), generated at `mkdocs build` time from
builder/backends/base.py: every attribute of `Backend` with its type, default and the comment above it, every
method with its signature and docstring, abstract ones first; and the `tritonbuild.backends` entry-point group a
plug-in declares (builder/backends/plugins.py). ci/docs_reference.py adds the page."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "builder" / "backends" / "base.py"


def attribute_comments(source: str, class_name: str) -> dict[str, str]:
    """Class attribute → the comment lines right above its annotation in the class body (how base.py
    documents them: a docstring cannot follow an annotation)."""
    lines = source.splitlines()
    tree = ast.parse(source)
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    out = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above, i = [], node.lineno - 2
            while i >= 0 and lines[i].strip().startswith("#"):
                above.insert(0, lines[i].strip().lstrip("#").strip())
                i -= 1
            out[node.target.id] = " ".join(above)
    return out


def prose(text: str) -> str:
    """Source text as Markdown prose: '<' and '>' as entities (a '<step kind>' is not an HTML tag)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def attribute_rows(cell) -> list[str]:
    from tritonbuild.backends.base import Backend

    source = BASE.read_text()
    annotations = ast.parse(source)
    (cls,) = [n for n in annotations.body if isinstance(n, ast.ClassDef) and n.name == "Backend"]
    types = {
        n.target.id: ast.unparse(n.annotation)
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    comments = attribute_comments(source, "Backend")
    rows = ["| attribute | type | default | what |", "|---|---|---|---|"]
    for name, annotation in types.items():
        default = (
            f"`{cell(repr(vars(Backend)[name]))}`" if name in vars(Backend) else "**required**"
        )
        rows.append(
            f"| `{name}` | `{cell(annotation)}` | {default} | {cell(prose(comments[name]))} |"
        )
    return rows


def methods() -> list[tuple[str, str, str, bool]]:
    """(name, signature, docstring, abstract) of each public method of Backend, abstract ones first, then in
    source order."""
    from tritonbuild.backends.base import Backend

    found = [
        (name, member)
        for name, member in vars(Backend).items()
        if inspect.isfunction(member) and not name.startswith("_")
    ]
    rows = [
        (
            name,
            str(inspect.signature(member)).replace("'", ""),
            inspect.getdoc(member) or "",
            getattr(member, "__isabstractmethod__", False),
        )
        for name, member in found
    ]
    return sorted(rows, key=lambda row: not row[3])


def backend_interface_page(generated: str, cell) -> str:
    from tritonbuild.backends.base import Backend
    from tritonbuild.backends.plugins import GROUP

    lines = [
        generated,
        "# Backend interface\n",
        f"{inspect.getdoc(Backend)} Everything a stage may ask of a backend, read from "
        "`builder/backends/base.py` (the class `Backend`). How to add one: "
        "[Add a backend](../contributing/backend.md).\n",
        "## Registering a backend\n",
        f"An installed distribution makes its backend reach every command (`validate`, `build`, `verify`, "
        f"`schema` ...) with one entry point in the group `{GROUP}`, named after the backend's recipe kind "
        "(`Backend.name`) and pointing at a `Backend` subclass (instantiated without arguments) or instance:\n",
        f'```toml\n[project.entry-points."{GROUP}"]\nmykind = "mypkg.backend:MyBackend"\n```\n',
        "A plug-in that cannot be registered (its import fails, it is no `Backend`, its name is a built-in's "
        "or differs from its entry point's, its declarations are refused) is an error of class `plugin` "
        "([exit 12](exit-codes.md)) naming the distribution and the entry point, where a recipe names its "
        "kind; every other command warns and goes on with the built-in backends. An embedding application "
        "can instead call `tritonbuild.backends.REGISTRY.register(MyBackend())`.\n",
        "## Attributes\n",
        "Class attributes a backend sets (**required**: no default).\n",
        *attribute_rows(cell),
        "",
        "## Methods\n",
    ]
    for name, signature, doc, abstract in methods():
        lines.append(f"### `{name}`\n")
        lines.append(f"```python\ndef {name}{signature}\n```\n")
        if abstract:
            lines.append("*Abstract: every backend implements it.*\n")
        lines.append(f"{prose(doc) or 'Not documented.'}\n")
    return "\n".join(lines)
