"""The LoRA facts of one vLLM wheel (the package's facts/vllm_lora.json `versions` entry), derived whole by
`python -m tests.contracts.refresh vllm-wheel WHEEL... --write` beside the other vLLM facts (vllm_wheels.py).

Per wheel, from LoRAConfig's file (vllm/config/lora.py, or vllm/config.py before vLLM split its config): the values
max_lora_rank takes (the module's MaxLoRARanks Literal, or the possible_max_ranks tuple LoRAConfig.__post_init__
checks before 0.11); its default (EngineArgs.max_lora_rank's literal where it has one, else LoRAConfig's, which
EngineArgs takes); LoRAConfig's cross-key rule max_cpu_loras >= max_loras (the comparison to its message; null
where LoRAConfig has no such check: the builder then does not apply it); EngineArgs' max_lora_rank line; and, where
the wheel has vllm/lora/peft_helper.py, PEFTHelper.validate_legal's rank check with the worker's call of it. Each
with its path and line. Standard library only."""

from __future__ import annotations

import ast
import hashlib
import json
import re
import zipfile
from pathlib import Path

from tests.contracts import vllm_wheels
from tests.contracts.facts import path as fact_path

ARGS = "vllm/engine/arg_utils.py"
CONFIGS = ("vllm/config/lora.py", "vllm/config/__init__.py", "vllm/config.py")
PEFT = "vllm/lora/peft_helper.py"
WORKER = "vllm/lora/worker_manager.py"
CPU_RULE = "LoRAConfig refuses max_cpu_loras below max_loras at engine start (unset: max_loras)"


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    if not found:
        raise ValueError(f"no class {name}")
    return found[0]


def _field(cls: ast.ClassDef, name: str) -> ast.AnnAssign:
    for s in cls.body:
        if isinstance(s, ast.AnnAssign) and getattr(s.target, "id", None) == name:
            return s
    raise ValueError(f"{cls.name} has no field {name}")


def _ranks(tree: ast.Module, cls: ast.ClassDef) -> tuple[list[int], int, str]:
    """(the ranks, the line they are written on, what names them): MaxLoRARanks = Literal[...] at module level,
    else possible_max_ranks = (...) inside LoRAConfig."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "MaxLoRARanks":
            values = node.value.slice
            items = values.elts if isinstance(values, ast.Tuple) else [values]
            return [i.value for i in items], node.lineno, "MaxLoRARanks"
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == (
            "possible_max_ranks"
        ):
            return list(ast.literal_eval(node.value)), node.lineno, "possible_max_ranks"
    raise ValueError("neither MaxLoRARanks nor LoRAConfig's possible_max_ranks")


def _default(config: ast.AnnAssign, path: str, args: ast.AnnAssign) -> tuple[int, str]:
    """max_lora_rank's default as the engine gets it: EngineArgs' literal, else LoRAConfig's."""
    for node, where in ((args, ARGS), (config, path)):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, int):
            return node.value.value, f"{where}:{node.lineno}"
    raise ValueError("max_lora_rank has no literal default in EngineArgs or LoRAConfig")


def _attr(node) -> str | None:
    return node.attr if isinstance(node, ast.Attribute) else None


def _cpu_rule(cls: ast.ClassDef, path: str, rows: list[str]) -> dict | None:
    """The `max_cpu_loras < max_loras` test and the message LoRAConfig raises under it (None: no such test)."""
    for node in ast.walk(cls):
        test = node.test if isinstance(node, ast.If) else None
        if (
            isinstance(test, ast.Compare)
            and _attr(test.left) == "max_cpu_loras"
            and isinstance(test.ops[0], ast.Lt)
            and _attr(test.comparators[0]) == "max_loras"
        ):
            raised = next(n for n in ast.walk(node) if isinstance(n, ast.Raise))
            message = raised.exc.args[0]
            return {
                "where": f"{path}:{node.lineno}-{message.end_lineno}",
                "text": rows[message.lineno - 1].strip(),
                "meaning": CPU_RULE,
            }
    return None


def _fstring(node: ast.JoinedStr) -> str:
    """An f-string with each field named by its last attribute: f"rank {self.r}" -> "rank {r}"."""
    return "".join(
        v.value
        if isinstance(v, ast.Constant)
        else "{" + (_attr(v.value) or getattr(v.value, "id", "?")) + "}"
        for v in node.values
    )


def rank_check(read) -> dict | None:
    """Where PEFTHelper.validate_legal refuses an adapter whose r exceeds max_lora_rank (None: no peft_helper.py)."""
    text = read(PEFT)
    if text is None:
        return None
    func = next(
        n
        for n in ast.walk(_class(ast.parse(text), "PEFTHelper"))
        if isinstance(n, ast.FunctionDef) and n.name == "validate_legal"
    )
    check = next(
        n
        for n in ast.walk(func)
        if isinstance(n, ast.If)
        and isinstance(n.test, ast.Compare)
        and _attr(n.test.left) == "r"
        and _attr(n.test.comparators[0]) == "max_lora_rank"
    )
    raised = next(n for n in ast.walk(func) if isinstance(n, ast.Raise))
    calls = [
        n
        for n, line in enumerate((read(WORKER) or "").splitlines(), 1)
        if ".validate_legal(" in line
    ]
    return {
        "where": f"{PEFT}:{check.lineno}-{check.end_lineno} (PEFTHelper.validate_legal)",
        "message": _fstring(next(n for n in ast.walk(check) if isinstance(n, ast.JoinedStr))),
        "raises": raised.exc.func.id,
        "called_from": f"{WORKER}:{calls[0]} (on loading an adapter a request names)"
        if calls
        else None,
    }


def lora_facts(read, src: dict) -> dict:
    """The vllm_lora.json `versions` entry of the wheel read(member) reads; src: its package, version, wheel,
    sha256 and commit."""
    path = next((p for p in CONFIGS if "class LoRAConfig" in (read(p) or "")), None)
    if path is None or read(ARGS) is None:
        raise ValueError(f"no LoRAConfig in {', '.join(CONFIGS)}, or no {ARGS}")
    text, args_text = read(path), read(ARGS)
    tree = ast.parse(text)
    cls = _class(tree, "LoRAConfig")
    field, args = (
        _field(cls, "max_lora_rank"),
        _field(_class(ast.parse(args_text), "EngineArgs"), "max_lora_rank"),
    )
    ranks, line, named = _ranks(tree, cls)
    default, where = _default(field, path, args)
    entry = {
        "source": {
            "repository": "vllm-project/vllm",
            **src,
            "path": path,
            "lines": f"{line} ({named}), {field.lineno} (LoRAConfig.max_lora_rank)",
        },
        "max_lora_ranks": ranks,
        "default_max_lora_rank": default,
        "default_where": where,
        "max_cpu_loras_rule": _cpu_rule(cls, path, text.splitlines()),
        "engine_args_type": {
            "where": f"{ARGS}:{args.lineno}",
            "text": args_text.splitlines()[args.lineno - 1].strip(),
        },
    }
    check = rank_check(read)
    return {**entry, **({"rank_check": check} if check else {})}


def derive(wheel: Path) -> dict:
    """The vllm_lora.json `versions` entry of one wheel."""
    zf = zipfile.ZipFile(wheel)
    names = set(zf.namelist())

    def read(member: str) -> str | None:
        return zf.read(member).decode() if member in names else None

    return lora_facts(
        read,
        {
            "package": "vllm",
            "version": wheel.name.split("-")[1],
            "wheel": wheel.name,
            "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
            "commit": vllm_wheels._commit(read)[0],
        },
    )


def _vkey(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[.]|(?<=\d)(?=[a-z])", version))


def write(derived: dict[str, dict], failed: dict[str, str]) -> None:
    """Put the derived entries into facts/vllm_lora.json `versions` (by version), each out of `unrecorded`; a
    version whose wheel gave no LoRA facts (or that has no wheel) goes to `unrecorded` with why."""
    file = fact_path("vllm_lora")
    doc = json.loads(file.read_text())
    versions = {**doc["versions"], **derived}
    doc["versions"] = dict(sorted(versions.items(), key=lambda kv: _vkey(kv[0])))
    unrecorded = {
        v: why for v, why in {**doc.get("unrecorded", {}), **failed}.items() if v not in versions
    }
    doc["unrecorded"] = dict(sorted(unrecorded.items(), key=lambda kv: _vkey(kv[0])))
    file.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
