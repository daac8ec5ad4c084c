"""The speculative-decoding facts of one vLLM wheel (facts/vllm_speculative.json), derived whole by
`python -m tests.contracts.refresh vllm-wheel WHEEL... --write` beside the other vLLM facts (vllm_wheels.py).

Per wheel: whether AsyncEngineArgs has speculative_config at all; SpeculativeConfig's fields tritonbuild writes
(WRITES) with their lines; the methods its `method` field takes (the SpeculativeMethod Literal and the Literals it
names, or, where `method` is a plain str, the values SpeculativeConfig sets it to); and whether the engine runs
method draft_model (EngineArgs raises NotImplementedError for it, or the V1 engine has a DraftModelProposer, or
neither: not known). Standard library only."""

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
    }
