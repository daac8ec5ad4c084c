"""The speculative-decoding facts of one vLLM wheel (facts/vllm_speculative.json), derived whole by
`python -m tests.contracts.refresh vllm-wheel WHEEL... --write` beside the other vLLM facts (vllm_wheels.py).

Per wheel: whether AsyncEngineArgs has speculative_config at all; SpeculativeConfig's fields tritonbuild writes
(WRITES) with their lines; the methods its `method` field takes (the SpeculativeMethod Literal and the Literals it
names, or, where `method` is a plain str, the values SpeculativeConfig sets it to); and whether the engine runs
method draft_model (EngineArgs raises NotImplementedError for it, or the V1 engine has a DraftModelProposer, or
neither: not known); and which methods' drafters add attention layers that get KV cache beside the target's
(`drafter_kv`: the V1 GPU model runner's if / elif chain that sets self.drafter, each branch's methods — through
SpeculativeConfig's helpers such as use_eagle() — and whether the proposer class, or a base of it, collects the
attention layers its drafter added: an assignment to *draft_attn_layer_names; absent without a V1 runner), which
the memory plan reads. Standard library only."""

from __future__ import annotations

import ast
import hashlib
import re
import zipfile
from pathlib import Path

from tests.contracts import refresh

ARGS = "vllm/engine/arg_utils.py"
CONFIGS = ("vllm/config/speculative.py", "vllm/config/__init__.py", "vllm/config.py")
DRAFT_PROPOSER = "vllm/v1/spec_decode/draft_model.py"
RUNNER = "vllm/v1/worker/gpu_model_runner.py"
PROPOSERS = "vllm/v1/spec_decode/"
WRITES = (
    "method",
    "model",
    "num_speculative_tokens",
)  # the keys of model.json's speculative_config


def _literals(node, aliases: dict, lines: dict) -> list[str]:
    """The strings a type expression admits through Literal[...] (Optional / | None / SkipValidation unwrapped,
    module-level Literal aliases followed; the alias lines used go to `lines`)."""
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else []
    if isinstance(node, ast.Name):
        if node.id in aliases:
            lines[node.id] = aliases[node.id].lineno
            return _literals(aliases[node.id].value, aliases, lines)
        return []
    if isinstance(node, ast.BinOp):
        return _literals(node.left, aliases, lines) + _literals(node.right, aliases, lines)
    if isinstance(node, ast.Subscript):
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return [s for n in inner for s in _literals(n, aliases, lines)]
    return []


def _set_values(cls: ast.ClassDef, field: str) -> list[str]:
    """The string constants the class assigns to self.<field> (a field annotated as a plain str)."""
    return sorted(
        {
            n.value.value
            for n in ast.walk(cls)
            if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Constant)
            and isinstance(n.value.value, str)
            and any(isinstance(t, ast.Attribute) and t.attr == field for t in n.targets)
        }
    )


def speculative_config(text: str) -> dict:
    """SpeculativeConfig's written fields (field → line) and its methods, with the lines they are read at."""
    tree = ast.parse(text)
    aliases = {
        n.targets[0].id: n
        for n in tree.body
        if isinstance(n, ast.Assign)
        and isinstance(n.targets[0], ast.Name)
        and isinstance(n.value, ast.Subscript)
    }
    cls = next(
        n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SpeculativeConfig"
    )
    fields = {
        s.target.id: s
        for s in cls.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    }
    if "method" not in fields:
        raise ValueError("SpeculativeConfig has no method field")
    used: dict[str, int] = {}
    methods = sorted(set(_literals(fields["method"].annotation, aliases, used)))
    how = "Literal"
    if not methods:
        methods, how = (
            _set_values(cls, "method"),
            f"method: {ast.unparse(fields['method'].annotation)}; the "
            "values SpeculativeConfig sets it to",
        )
    if not methods:
        raise ValueError("no method values in SpeculativeConfig")
    lines = [f"{ln} ({name})" for name, ln in used.items()]
    lines += [f"{fields[f].lineno} ({f})" for f in WRITES if f in fields]
    return {
        "class_line": cls.lineno,
        "fields": sorted(f for f in WRITES if f in fields),
        "methods": methods,
        "methods_from": how,
        "lines": ", ".join(lines),
    }


def draft_model(read) -> dict:
    """Whether the engine runs method draft_model: refused (EngineArgs raises NotImplementedError for it), runs
    (the V1 engine's DraftModelProposer), or not known (neither is in the wheel)."""
    rows = (read(ARGS) or "").splitlines()
    for n, line in enumerate(rows):
        if "raise NotImplementedError" in line and re.search(
            r"(?i)draft model", " ".join(rows[n : n + 3])
        ):
            message = re.search(r'"([^"]*)', " ".join(rows[n : n + 3])).group(1).strip()
            return {
                "runs": False,
                "path": ARGS,
                "lines": f"{n + 1}",
                "why": f"EngineArgs raises NotImplementedError {message!r} for method draft_model",
            }
    text = read(DRAFT_PROPOSER)
    if text and (m := re.search(r"(?m)^class (DraftModelProposer)\b", text)):
        return {
            "runs": True,
            "path": DRAFT_PROPOSER,
            "lines": f"{text[: m.start()].count(chr(10)) + 1}",
            "why": "the V1 engine's DraftModelProposer; no NotImplementedError for draft_model in EngineArgs",
        }
    return {
        "runs": None,
        "path": ARGS,
        "lines": "whole file",
        "why": f"neither a NotImplementedError for draft_model in {ARGS} nor {DRAFT_PROPOSER}: whether the "
        "engine (or its V0 fallback) runs it is not recorded",
    }


def _method_values(node, helpers: dict) -> tuple[list[str], bool]:
    """The methods a runner's test names: `...method == "x"`, `...method in ("x", "y")`, and through a call of a
    SpeculativeConfig helper (`use_eagle()`), the methods its body compares self.method with; and whether the
    test is the method alone (no `and` with another condition, such as the draft model's type)."""
    out, alone = [], True
    for n in ast.walk(node):
        if isinstance(n, ast.BoolOp) and isinstance(n.op, ast.And):
            alone = False
        if isinstance(n, ast.Compare) and any(
            getattr(side, "attr", None) == "method" for side in (n.left, *n.comparators)
        ):
            for side in n.comparators:
                items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                out += [
                    i.value
                    for i in items
                    if isinstance(i, ast.Constant) and isinstance(i.value, str)
                ]
        elif isinstance(n, ast.Call) and getattr(n.func, "attr", None) in helpers:
            values, whole = _method_values(helpers[n.func.attr], {})
            out, alone = out + values, alone and whole
    return out, alone


def _drafter_chain(tree: ast.Module) -> list[tuple[ast.expr, str, int]]:
    """The runner's if / elif chain that sets self.drafter: (test, the class it constructs, its line) per branch."""

    def sets(branch: ast.If) -> tuple[str, int] | None:
        for s in branch.body:
            target = s.targets[0] if isinstance(s, ast.Assign) else None
            if getattr(target, "attr", None) == "drafter" and isinstance(s.value, ast.Call):
                return getattr(s.value.func, "id", None) or ast.unparse(s.value.func), s.lineno
        return None

    heads = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.If) and sets(n)), key=lambda n: n.lineno
    )
    chain, node = [], heads[0] if heads else None
    while isinstance(node, ast.If) and (got := sets(node)):
        chain.append((node.test, *got))
        node = node.orelse[0] if len(node.orelse) == 1 else None
    return chain


def _proposer_classes(read, names: list[str]) -> dict[str, tuple[str, ast.ClassDef]]:
    """Every class of the V1 spec_decode package: name -> (path, class)."""
    out = {}
    for path in names:
        if path.startswith(PROPOSERS) and path.endswith(".py"):
            for n in ast.parse(read(path)).body:
                if isinstance(n, ast.ClassDef):
                    out[n.name] = (path, n)
    return out


def _layers_where(cls: str, classes: dict) -> str | None:
    """Where the proposer class (or a base of it in the package) collects the attention layers its drafter model
    adds (an assignment to a name or attribute *draft_attn_layer_names), as path:first-last; None: it adds none."""
    if cls not in classes:
        return None
    path, node = classes[cls]
    for n in ast.walk(node):
        targets = n.targets if isinstance(n, ast.Assign) else []
        if any(
            "draft_attn_layer_names" in (getattr(t, "id", "") or getattr(t, "attr", ""))
            for t in targets
        ):
            return f"{path}:{n.lineno}-{n.end_lineno}"
    bases = (_layers_where(getattr(b, "id", ""), classes) for b in node.bases)
    return next((b for b in bases if b), None)


def drafter_kv(read, names: list[str], config: str, src: dict) -> dict | None:
    """Which methods' drafters add attention layers that get KV cache beside the target's: per proposer class the
    V1 GPU model runner constructs, the methods its branch takes (first branch wins) and where it collects the
    layers. None where the wheel has no V1 runner setting self.drafter."""
    text = read(RUNNER)
    chain = _drafter_chain(ast.parse(text)) if text else []
    if not chain:
        return None
    spec = next(
        n
        for n in ast.parse(read(config)).body
        if isinstance(n, ast.ClassDef) and n.name == "SpeculativeConfig"
    )
    helpers = {f.name: f for f in spec.body if isinstance(f, ast.FunctionDef)}
    classes, seen, proposers = _proposer_classes(read, names), set(), {}
    for (
        test,
        cls,
        _line,
    ) in chain:  # a method goes to the first branch that takes it whatever else holds
        values, alone = _method_values(test, helpers)
        methods = sorted(set(values) - seen)
        seen |= set(methods) if alone else set()
        p = proposers.setdefault(cls, {"methods": [], "layers": _layers_where(cls, classes)})
        p["methods"] = sorted({*p["methods"], *methods})
    return {
        "methods": sorted({m for p in proposers.values() if p["layers"] for m in p["methods"]}),
        "proposers": proposers,
        "source": {
            **src,
            "path": RUNNER,
            "lines": f"{chain[0][2]}-{chain[-1][2]} (self.drafter = ...)",
        },
    }


def derive(wheel: Path, images: list[str]) -> dict:
    """The facts/vllm_speculative.json `versions` entry of one wheel."""
    zf = zipfile.ZipFile(wheel)
    names = set(zf.namelist())

    def read(member: str) -> str | None:
        return zf.read(member).decode() if member in names else None

    src = {
        "package": "vllm",
        "version": wheel.name.split("-")[1],
        "wheel": wheel.name,
        "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
    }
    args = refresh.engine_args(read(ARGS))
    if "speculative_config" not in args["AsyncEngineArgs"]:
        return {
            "source": {
                **src,
                "path": ARGS,
                "lines": f"{args['lines']['AsyncEngineArgs']} (AsyncEngineArgs)",
            },
            "images": images,
            "speculative_config": False,
        }
    path = next(p for p in CONFIGS if "class SpeculativeConfig" in (read(p) or ""))
    got = speculative_config(read(path))
    draft = draft_model(read)
    kv = drafter_kv(read, sorted(names), path, src)
    return {
        "source": {
            **src,
            "path": path,
            "lines": f"{got['class_line']} (SpeculativeConfig), {got['lines']}",
        },
        "images": images,
        "speculative_config": True,
        "fields": got["fields"],
        "methods": got["methods"],
        "methods_from": got["methods_from"],
        "draft_model": {
            "runs": draft["runs"],
            "why": draft["why"],
            "source": {**src, "path": draft["path"], "lines": draft["lines"]},
        },
        **({"drafter_kv": kv} if kv else {}),
    }
