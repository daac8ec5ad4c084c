"""The type of each AsyncEngineArgs field of one vLLM wheel (vllm/engine/arg_utils.py), as model.json's JSON value must
have it: the annotation as written, its line, and what it accepts: "bool", "int", "float", "str", "null", "list",
"dict", {"literal": [...]} or "any" (a class, a callable, anything this reader does not resolve: not checked).
A name imported into arg_utils.py (`from vllm.config.cache import CacheDType`) or defined there is resolved when
it is a Literal (or a union of them) in that module. Standard library only; vllm_wheels.derive records it per
version (`types` of facts/vllm_engine_args.json, which the builder reads from builder/facts/)."""

from __future__ import annotations

import ast

SCALARS = {"bool": "bool", "int": "int", "float": "float", "str": "str", "None": "null"}
CONTAINERS = {
    "list": "list",
    "dict": "dict",
    "tuple": "list",
    "set": "list",
    "List": "list",
    "Dict": "dict",
}


def _aliases(tree: ast.Module) -> dict[str, ast.expr]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                out[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            out[node.target.id] = node.value
        elif type(node).__name__ == "TypeAlias":  # `type X = ...` (3.12)
            out[node.name.id] = node.value
    return out


def _imports(tree: ast.Module) -> dict[str, str]:
    """name → the module path (vllm/...py) it is imported from."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vllm"):
            for alias in node.names:
                out[alias.asname or alias.name] = node.module.replace(".", "/")
    return out


class Resolver:
    def __init__(self, read):
        self.read = read  # member path → text or None
        self.modules: dict[str, tuple[dict, dict]] = {}

    def module(self, path: str) -> tuple[dict, dict]:
        if path not in self.modules:
            text = self.read(path + ".py") or self.read(path + "/__init__.py")
            tree = ast.parse(text) if text else ast.Module(body=[], type_ignores=[])
            self.modules[path] = (_aliases(tree), _imports(tree))
        return self.modules[path]

    def accepts(self, node: ast.expr, where: str, depth: int = 0) -> list:
        if depth > 6:
            return ["any"]
        if isinstance(node, ast.Constant) and node.value is None:
            return ["null"]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
            return self.accepts(ast.parse(node.value, mode="eval").body, where, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return _union(
                self.accepts(node.left, where, depth), self.accepts(node.right, where, depth)
            )
        if isinstance(node, ast.Subscript):
            head = ast.unparse(node.value).split(".")[-1]
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if head == "Literal":
                values = [i.value for i in items if isinstance(i, ast.Constant)]
                return [{"literal": values}] if len(values) == len(items) else ["any"]
            if head in ("Optional", "Union"):
                out: list = ["null"] if head == "Optional" else []
                for item in items:
                    out = _union(out, self.accepts(item, where, depth + 1))
                return out
            if head == "Annotated":
                return self.accepts(items[0], where, depth + 1)
            return [CONTAINERS[head]] if head in CONTAINERS else ["any"]
        if isinstance(node, ast.Name):
            if node.id in SCALARS:
                return [SCALARS[node.id]]
            if node.id in CONTAINERS:
                return [CONTAINERS[node.id]]
            return self.name(node.id, where, depth)
        return ["any"]

    def name(self, name: str, where: str, depth: int) -> list:
        """A name defined in the module at where, or imported into it (followed through re-exports)."""
        aliases, imports = self.module(where)
        if name in aliases:
            return self.accepts(aliases[name], where, depth + 1)
        if name in imports and depth < 6:
            return self.name(name, imports[name], depth + 1)
        return ["any"]


def _union(a: list, b: list) -> list:
    if "any" in a or "any" in b:
        return ["any"]
    out = [x for x in a if not isinstance(x, dict)] + [x for x in b if not isinstance(x, dict)]
    literals = [v for x in a + b if isinstance(x, dict) for v in x["literal"]]
    out = sorted(set(out))
    return out + ([{"literal": list(dict.fromkeys(literals))}] if literals else [])


def field_types(read, path: str = "vllm/engine/arg_utils.py") -> dict:
    """field → {annotation, line, accepts} for EngineArgs and AsyncEngineArgs."""
    tree = ast.parse(read(path))
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    resolver = Resolver(read)
    out = {}
    for name in ("EngineArgs", "AsyncEngineArgs"):
        for stmt in classes[name].body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                field, annotation = stmt.target.id, ast.unparse(stmt.annotation)
                if field.startswith("_") or annotation.startswith("ClassVar"):
                    continue
                out[field] = {
                    "annotation": annotation,
                    "line": stmt.lineno,
                    "accepts": resolver.accepts(stmt.annotation, path[: -len(".py")]),
                }
    return dict(sorted(out.items()))
