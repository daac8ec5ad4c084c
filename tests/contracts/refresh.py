"""Re-derive the upstream facts in tests/contracts/facts/ from upstream source files (see README.md here).

Facts are names, types and flags read out of upstream's own files, never the files themselves:

    python -m tests.contracts.refresh triton-templates DIR   # DIR = .../inflight_batcher_llm (all_models)
    python -m tests.contracts.refresh cpp-parameters FILE...  # model_instance_state.cc, model_state.cc
    python -m tests.contracts.refresh trtllm-release GITDIR TAG  # a tensorrtllm_backend release (templates...)
    python -m tests.contracts.refresh argparse FILE            # convert_checkpoint.py, quantize.py, build.py
    python -m tests.contracts.refresh fields FILE CLASS        # @dataclass / pydantic class fields (+ bases)
    python -m tests.contracts.refresh python-io FILE FUNCTION  # literal `inputs = [...]` / `outputs = [...]`
    python -m tests.contracts.refresh engine-args FILE         # vLLM vllm/engine/arg_utils.py (from a wheel)
    python -m tests.contracts.refresh compatibility FILE       # server docs/introduction/compatibility.md
    python -m tests.contracts.refresh image-pythons GITDIR     # server clone: each image's Python (image_pythons.py)
    python -m tests.contracts.refresh vllm-wheel WHEEL... [--write]  # every vLLM fact of each wheel (vllm_wheels.py)
    python -m tests.contracts.refresh trtllm-llmapi VERSION --git GITDIR | --wheel WHEEL_OR_URL [--sha256 H] [--write]
                                                   # llm_args.py at a TensorRT-LLM release (trtllm_llm_args.py)
    python -m tests.contracts.refresh --check --mirror OWNER/NAME=GITDIR --file ... --wheel ...  # see drift.py

Each command prints JSON; compare it with the recorded fact (git diff after pasting) and update the fact's
``source`` (repository, commit, path) in the same change. Standard library only: runs in any checkout.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path


def _block(text: str, start: int, open_: str, close: str) -> tuple[str, int]:
    """The text between the bracket at text[start] and its match; (body, index after the match)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    raise ValueError("unbalanced brackets")


def _entries(body: str) -> list[str]:
    out, i = [], 0
    while (j := body.find("{", i)) != -1:
        inner, i = _block(body, j, "{", "}")
        out.append(inner)
    return out


def _tensor(entry: str) -> dict:
    name = re.search(r'\bname:\s*"([^"]+)"', entry).group(1)
    dtype = re.search(r"\bdata_type:\s*([^\s,]+)", entry).group(1)
    dims = [
        int(d) if d.lstrip("-").isdigit() else d
        for d in re.search(r"\bdims:\s*\[([^\]]*)\]", entry).group(1).replace(",", " ").split()
    ]
    t = {"name": name, "data_type": dtype, "dims": dims}
    if re.search(r"\boptional:\s*true", entry):
        t["optional"] = True
    if re.search(r"\breshape:", entry):
        t["reshape"] = [
            int(d)
            for d in re.search(r"shape:\s*\[([^\]]*)\]", entry).group(1).replace(",", " ").split()
        ]
    if re.search(r"\ballow_ragged_batch:\s*true", entry):
        t["allow_ragged_batch"] = True
    return t


def template_facts(text: str) -> dict:
    """Tensors and parameter keys of one upstream config.pbtxt template (``${…}`` left as written)."""
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    facts: dict = {}
    for kind in ("input", "output"):
        m = re.search(rf"(?m)^{kind}\s*\[", text)
        facts[kind + "s"] = (
            [_tensor(e) for e in _entries(_block(text, m.end() - 1, "[", "]")[0])] if m else []
        )
    facts["parameters"] = sorted(
        set(re.findall(r'\bkey:\s*"([^"]+)"', text.split("ensemble_scheduling")[0]))
    )
    decoupled = re.search(r"\bdecoupled:\s*(\S+)", text)
    facts["decoupled"] = decoupled.group(1) if decoupled else None
    return facts


def _field(text: str, name: str) -> str | None:
    m = re.search(rf"\b{name}\s*:\s*(\[[^\]]*\]|\"[^\"]*\"|\$\{{\w+\}}|[^\s{{}}]+)", text)
    return m.group(1).strip('"') if m else None


def _maps(entry: str, field: str) -> dict:
    out = {}
    for m in re.finditer(rf"\b{field}\s*\{{", entry):
        body = _block(entry, m.end() - 1, "{", "}")[0]
        out[_field(body, "key")] = _field(body, "value")
    return out


def template_structure(text: str) -> dict:
    """One filled-by-fill_template config.pbtxt template as data: its scalar fields, batching, instance group,
    parameters (key → value as written), tensors and ensemble steps; each ``${name}`` left as written, with the
    lines (1-based) where it occurs."""
    lines = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.lstrip().startswith("#"):
            for name in re.findall(r"\$\{(\w+)\}", line):
                lines.setdefault(name, []).append(n)
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    head, _, scheduling = body.partition("ensemble_scheduling")
    out = {
        key: _field(head.split("input", 1)[0], key)
        for key in ("name", "backend", "platform", "max_batch_size")
    }
    out = {k: v for k, v in out.items() if v is not None}
    out["decoupled"] = _field(head, "decoupled")
    if m := re.search(r"(?m)^dynamic_batching\s*\{", head):
        block = _block(head, m.end() - 1, "{", "}")[0]
        out["dynamic_batching"] = {
            k: _field(block, k)
            for k in ("preferred_batch_size", "max_queue_delay_microseconds", "max_queue_size")
            if _field(block, k) is not None
        }
    if m := re.search(r"(?m)^instance_group\s*\[", head):
        out["instance_group"] = [
            {k: _field(e, k) for k in ("count", "kind") if _field(e, k) is not None}
            for e in _entries(_block(head, m.end() - 1, "[", "]")[0])
        ]
    out["parameters"] = {}
    for m in re.finditer(r"(?m)^parameters\s*:?\s*\{", head):
        block = _block(head, m.end() - 1, "{", "}")[0]
        out["parameters"][_field(block, "key")] = _field(block, "string_value")
    tensors = template_facts(head)
    out["inputs"], out["outputs"] = tensors["inputs"], tensors["outputs"]
    if scheduling:
        steps = _block(scheduling, scheduling.index("["), "[", "]")[0]
        out["steps"] = [
            {
                "model_name": _field(e, "model_name"),
                "model_version": int(_field(e, "model_version")),
                "input_map": _maps(e, "input_map"),
                "output_map": _maps(e, "output_map"),
            }
            for e in _entries(steps)
        ]
    out["placeholder_lines"] = lines
    return out


def cpp_parameters(text: str) -> dict:
    """Every ``GetParameter<T>("name")`` of the tensorrtllm C++ backend, split by whether a try block encloses
    it (guarded: a default applies when the key is absent) or not (unguarded: a missing key fails the load)."""
    code = re.sub(r"//[^\n]*", "", text)
    guarded, unguarded = set(), set()
    stack: list[bool] = []
    call = re.compile(r'GetParameter<[^>]*(?:<[^>]*>)*[^>]*>\(\s*"(\w+)"\s*\)')
    i = 0
    while i < len(code):
        c = code[i]
        if c == "{":
            stack.append(bool(re.search(r"\btry\s*$", code[max(0, i - 20) : i])))
        elif c == "}":
            stack.pop()
        elif c == "G" and (m := call.match(code, i)):
            (guarded if any(stack) else unguarded).add(m.group(1))
            i = m.end()
            continue
        i += 1
    return {"unguarded": sorted(unguarded), "guarded": sorted(guarded - unguarded)}


def argparse_flags(text: str) -> list[str]:
    """Option strings of every ``add_argument`` call in a script (any parser or argument group)."""
    flags = set()
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            flags.update(
                a.value
                for a in node.args
                if isinstance(a, ast.Constant)
                and isinstance(a.value, str)
                and a.value.startswith("-")
            )
    return sorted(flags)


def class_fields(text: str, name: str) -> list[str]:
    """Annotated public fields of a class and of its bases defined in the same file."""
    classes = {n.name: n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef)}
    out: set[str] = set()

    def walk(cls: ast.ClassDef) -> None:
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in classes:
                walk(classes[base.id])
        for stmt in cls.body:
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and not stmt.target.id.startswith("_")
            ):
                ann = ast.unparse(stmt.annotation)
                if not ann.startswith("ClassVar"):
                    out.add(stmt.target.id)

    walk(classes[name])
    return sorted(out)


def engine_args(text: str) -> dict:
    """vLLM's ``AsyncEngineArgs`` fields (vllm/engine/arg_utils.py), the lines its classes start on, and how
    EngineArgs writes the prefix-caching default (None: resolved later by vLLM itself)."""
    tree = ast.parse(text)
    classes = {n.name: n.lineno for n in tree.body if isinstance(n, ast.ClassDef)}
    default = re.search(r"(?m)^    enable_prefix_caching: [^=\n]+= (.+)$", text)
    return {
        "AsyncEngineArgs": class_fields(text, "AsyncEngineArgs"),
        "lines": {
            "EngineArgs": classes["EngineArgs"],
            "AsyncEngineArgs": classes["AsyncEngineArgs"],
        },
        "enable_prefix_caching": default.group(1).strip() if default else None,
    }


def quantization_methods(text: str) -> dict:
    """vLLM's ``QuantizationMethods = Literal[...]`` (vllm/model_executor/layers/quantization/__init__.py): the
    values model.json's ``quantization`` may take, and the lines they are written on."""
    for node in ast.parse(text).body:
        if (
            isinstance(node, ast.Assign)
            and getattr(node.targets[0], "id", None) == "QuantizationMethods"
        ):
            values = node.value.slice
            items = values.elts if isinstance(values, ast.Tuple) else [values]
            return {"values": [i.value for i in items], "lines": f"{node.lineno}-{node.end_lineno}"}
    raise ValueError("no QuantizationMethods in this file")


def tp_heads_message(text: str) -> str:
    """The error vLLM raises when tensor parallelism does not divide the attention heads (vllm/config/model.py,
    ModelConfig.verify_with_parallel_config), with its f-string fields named as the fact names them."""
    m = re.search(
        r'f"Total number of attention heads \(\{\w+\}\)"\s*"( must be divisible by tensor parallel '
        r'size )"\s*f"\(\{\w+\}\)\."',
        text,
    )
    if not m:
        raise ValueError("no tensor-parallel heads message in this file")
    return "Total number of attention heads ({heads})" + m.group(1) + "({tp})."


def python_io(text: str, function: str) -> dict:
    """The literal ``inputs = [...]`` / ``outputs = [...]`` lists of one function (e.g. vllm_backend's
    auto_complete_config, which declares the model's tensors)."""
    out = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            for stmt in ast.walk(node):
                if (
                    isinstance(stmt, ast.Assign)
                    and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                    and stmt.targets[0].id in ("inputs", "outputs")
                ):
                    out[stmt.targets[0].id] = ast.literal_eval(stmt.value)
    return out


def readme_fills(text: str) -> dict:
    """The fill_template.py command lines of a README: model → {line, substitutions}, the shell variables the
    README sets before them resolved (fill_template's own default max_queue_size: 0 is not added)."""
    env = dict(re.findall(r"(?m)^([A-Z_]+)=(\S+)$", text))
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        m = re.search(
            r"(?:fill_template\.py|\{FILL_TEMPLATE_SCRIPT\})\s+-i\s+\S*?/(\w+)/config\.pbtxt\s+(\S+)",
            line,
        )
        if m:
            subs = re.sub(r"\$\{(\w+)\}", lambda v: env.get(v.group(1), v.group(0)), m.group(2))
            out[m.group(1)] = {
                "line": n,
                "substitutions": dict(s.split(":", 1) for s in subs.split(",")),
            }
    return out


def trtllm_release(git_dir: str, tag: str) -> dict:
    """One tensorrtllm_backend release: its commit, the C++ parameters it reads unguarded (with their lines),
    the inflight_batcher_llm templates' structure, and the README's fill_template.py lines."""
    import subprocess

    def show(path: str) -> str:
        return subprocess.run(
            ["git", "--git-dir", git_dir, "show", f"{tag}:{path}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    commit = subprocess.run(
        ["git", "--git-dir", git_dir, "rev-parse", f"{tag}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    src = "inflight_batcher_llm/src/"
    merged = {"unguarded": set(), "guarded": set()}
    lines: dict = {}
    for f in ("model_instance_state.cc", "model_state.cc"):
        text = show(src + f)
        facts = cpp_parameters(text)
        for key in merged:
            merged[key] |= set(facts[key])
        for key in facts["unguarded"]:
            lines.setdefault(key, []).extend(
                f"{src}{f}:{n}"
                for n, line in enumerate(text.splitlines(), 1)
                if "GetParameter<" in line and f'("{key}")' in line
            )
    models = ("preprocessing", "tensorrt_llm", "postprocessing", "ensemble", "tensorrt_llm_bls")
    root = "all_models/inflight_batcher_llm"
    return {
        "repository": "triton-inference-server/tensorrtllm_backend",
        "tag": tag,
        "commit": commit,
        "unguarded": {key: lines[key] for key in sorted(merged["unguarded"])},
        "guarded": sorted(merged["guarded"] - merged["unguarded"]),
        "templates": {
            m: {
                "path": f"{root}/{m}/config.pbtxt",
                **template_structure(show(f"{root}/{m}/config.pbtxt")),
            }
            for m in models
        },
        "readme_fill": {"path": "README.md", "models": readme_fills(show("README.md"))},
    }


COMPAT_COLUMNS = {
    "trtllm-python-py3": {
        "TensorRT-LLM version": "trtllm",
        "TensorRT version": "tensorrt",
        "CUDA version": "cuda",
    },
    "vllm-python-py3": {"vLLM version": "vllm", "CUDA version": "cuda"},
}


def compatibility(text: str) -> dict:
    """The trtllm and vllm image tables of Triton's release compatibility matrix: container → tag → versions,
    each row with the line it was read from (1-based)."""
    out: dict = {}
    container, header = None, None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            m = re.match(r"^## Container Name: (\S+)", line)
            container, header = (m.group(1) if m else None), None
            out.setdefault(container, {})
        elif container in COMPAT_COLUMNS and line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif re.fullmatch(r"\d\d\.\d\d", cells[0]):
                row = dict(zip(header, cells, strict=False))
                out[container][cells[0]] = {
                    "line": n,
                    **{
                        key: row[col].split("+")[0].strip()
                        for col, key in COMPAT_COLUMNS[container].items()
                    },
                }
    return {k: v for k, v in out.items() if k in COMPAT_COLUMNS}


def main(argv: list[str]) -> int:
    cmd, *args = argv
    if cmd == "--check":
        from tests.contracts.drift import main as check

        return check(args)
    if cmd == "vllm-wheel":
        from tests.contracts.vllm_wheels import main as vllm_wheel

        return vllm_wheel(args)
    if cmd == "trtllm-llmapi":
        from tests.contracts.trtllm_llm_args import main as trtllm_llmapi

        return trtllm_llmapi(args)
    if cmd == "trtllm-release":
        out = trtllm_release(args[0], args[1])
    elif cmd == "triton-templates":
        root = Path(args[0])
        out = {
            p.parent.name: template_facts(p.read_text())
            for p in sorted(root.glob("*/config.pbtxt"))
        }
    elif cmd == "cpp-parameters":
        merged = {"unguarded": set(), "guarded": set()}
        for f in args:
            facts = cpp_parameters(Path(f).read_text())
            merged["unguarded"] |= set(facts["unguarded"])
            merged["guarded"] |= set(facts["guarded"])
        out = {
            k: sorted(v - (merged["unguarded"] if k == "guarded" else set()))
            for k, v in merged.items()
        }
    elif cmd == "argparse":
        out = argparse_flags(Path(args[0]).read_text())
    elif cmd == "fields":
        out = class_fields(Path(args[0]).read_text(), args[1])
    elif cmd == "engine-args":
        out = engine_args(Path(args[0]).read_text())
    elif cmd == "compatibility":
        out = compatibility(Path(args[0]).read_text())
    elif cmd == "image-pythons":
        from tests.contracts.image_pythons import image_pythons

        out = image_pythons(args[0])
    elif cmd == "python-io":
        out = python_io(Path(args[0]).read_text(), args[1])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
