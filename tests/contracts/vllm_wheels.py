"""The vLLM facts of one wheel, derived whole: `python -m tests.contracts.refresh vllm-wheel WHEEL... [--write]`.

For each wheel (`pip download vllm==X --no-deps --only-binary :all:`): its version, sha256 and `_version.py`
commit; AsyncEngineArgs (vllm/engine/arg_utils.py); the quantization methods (QuantizationMethods, or the older
QUANTIZATION_METHODS list / dict); the tensor-parallel heads message (vllm/config/model.py, or vllm/config.py
before vLLM split it); what the AWQ / GPTQ override_quantization_method accepts (auto_awq.py / auto_gptq.py, or
awq_marlin.py / gptq_marlin.py before the rename); SpeculativeConfig and the drafters' KV layers
(vllm_spec_wheel.py); what LoRAConfig takes (vllm_lora_wheel.py). Prints the entries of
facts/vllm_engine_args.json `versions`, facts/vllm_quantization.json `marlin_override.by_version`,
facts/vllm_speculative.json `versions` and facts/vllm_lora.json `versions` (shipped with the builder:
builder/facts/, which backends/vllm/versions.py and lora.py read); --write puts them there (a version the wheel
cannot give a fact for goes to `unrecorded` with the reason).
Standard library only."""

from __future__ import annotations

import ast
import hashlib
import json
import re
import sys
import zipfile
from pathlib import Path

from tests.contracts import refresh, vllm_arg_types, vllm_lora_wheel, vllm_spec_wheel
from tests.contracts.facts import load
from tests.contracts.facts import path as fact_path

ROOT = Path(__file__).resolve().parents[2]
QUANT = "vllm/model_executor/layers/quantization/"
ARGS = "vllm/engine/arg_utils.py"


def quantization_methods(text: str) -> dict:
    """QuantizationMethods (Literal) where the file has it, else the older QUANTIZATION_METHODS list or dict."""
    try:
        return refresh.quantization_methods(text)
    except ValueError:
        pass
    for node in ast.parse(text).body:
        target = (
            node.target if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [None])[0]
        )
        if getattr(target, "id", None) == "QUANTIZATION_METHODS" and node.value is not None:
            items = node.value.keys if isinstance(node.value, ast.Dict) else node.value.elts
            return {"values": [i.value for i in items], "lines": f"{node.lineno}-{node.end_lineno}"}
    raise ValueError("no QuantizationMethods / QUANTIZATION_METHODS in this file")


def tp_heads(text: str) -> dict:
    """The lines from ModelConfig.verify_with_parallel_config to its heads-vs-TP message, and the message."""
    rows = text.splitlines()
    start = next(n for n, line in enumerate(rows, 1) if "def verify_with_parallel_config" in line)
    end = next(
        n for n, line in enumerate(rows, 1) if "must be divisible by tensor parallel" in line
    )
    return {"lines": f"{start}-{end + 1}", "message": refresh.tp_heads_message(text)}


def override(text: str, method: str) -> dict:
    """override_quantization_method's lines and the quantization values it accepts for a checkpoint of method."""
    rows = text.splitlines()
    start = next(i for i, line in enumerate(rows) if "def override_quantization_method" in line)
    end = next(
        (
            i
            for i in range(start + 1, len(rows))
            if rows[i].startswith(("    def ", "    @", "class "))
        ),
        len(rows),
    )
    while not rows[end - 1].strip():
        end -= 1
    body = "\n".join(rows[start:end])
    body = body[body.index("is_valid_user_quant") :]
    return {
        "lines": f"{start + 1}-{end}",
        "accepted": sorted({method, *re.findall(r'"([a-z_]+)"', body)}),
    }


def _override_file(read, method: str) -> str:
    for name in (f"auto_{method}.py", f"{method}_marlin.py"):
        text = read(QUANT + name)
        if text and "def override_quantization_method" in text and "is_valid_user_quant" in text:
            return QUANT + name
    raise ValueError(
        f"no override_quantization_method for {method} (auto_{method}.py, {method}_marlin.py)"
    )


def _commit(read) -> tuple[str | None, str]:
    """The commit the wheel names, and where it names it: vllm/_version.py's __commit_id__ (git describe's
    abbreviated sha, 0.10 on), vllm/commit_id.py's __commit__ (before 0.7), or none (0.7 to 0.9)."""
    m = re.search(
        r"""__commit_id__\s*=\s*(?:commit_id\s*=\s*)?['"]g?([0-9a-f]{7,40})['"]""",
        read("vllm/_version.py") or "",
    )
    if m:
        return m.group(1), "vllm/_version.py __commit_id__ in the wheel"
    m = re.search(r"""__commit__\s*=\s*['"]([0-9a-f]{40})['"]""", read("vllm/commit_id.py") or "")
    if m:
        return m.group(1), "vllm/commit_id.py __commit__ in the wheel"
    return (
        None,
        "none in the wheel (no __commit_id__ in vllm/_version.py, no vllm/commit_id.py): its sha256 pins it",
    )


def derive(wheel: Path, images: list[str]) -> tuple[dict, dict]:
    """(vllm_engine_args.json versions entry, vllm_quantization.json by_version entry) of one wheel."""
    zf = zipfile.ZipFile(wheel)
    names = set(zf.namelist())

    def read(member: str) -> str | None:
        return zf.read(member).decode() if member in names else None

    version, sha = wheel.name.split("-")[1], hashlib.sha256(wheel.read_bytes()).hexdigest()
    commit, commit_from = _commit(read)
    wheel_src = {
        "package": "vllm",
        "version": version,
        "wheel": wheel.name,
        "wheel_sha256": sha,
        "commit": commit,
        "commit_from": commit_from,
    }
    if read(ARGS) is None:
        raise ValueError(f"the wheel has no {ARGS}")
    args = refresh.engine_args(read(ARGS))
    model = next(
        p
        for p in ("vllm/config/model.py", "vllm/config/__init__.py", "vllm/config.py")
        if "must be divisible by tensor parallel" in (read(p) or "")
    )
    entry = {
        "source": {
            "repository": "vllm-project/vllm",
            **wheel_src,
            "commit_from": commit_from.replace("wheel", "wheel (git describe's abbreviated sha)")
            if "__commit_id__" in commit_from
            else commit_from,
            "path": ARGS,
            "line": args["lines"]["AsyncEngineArgs"],
            "lines": args["lines"],
        },
        "images": images,
        "AsyncEngineArgs": args["AsyncEngineArgs"],
        "enable_prefix_caching": args["enable_prefix_caching"],
        "quantization_methods": {
            "path": QUANT + "__init__.py",
            **quantization_methods(read(QUANT + "__init__.py")),
        },
        "tp_heads": {"path": model, **tp_heads(read(model))},
        # each field's annotation, its line in ARGS and the JSON values it accepts (vllm_arg_types.py)
        "types": vllm_arg_types.field_types(read, ARGS),
    }
    sources, accepted = [], {}
    for method in ("awq", "gptq"):
        path = _override_file(read, method)
        text = read(path)
        got = override(text, method)
        cls = [
            m.group(1)
            for m in re.finditer(
                r"(?m)^class (\w+)", text[: text.index("def override_quantization")]
            )
        ]
        sources.append(
            {
                **wheel_src,
                "path": path,
                "lines": f"{got['lines']} ({cls[-1]}.override_quantization_method)",
            }
        )
        accepted[method] = got["accepted"]
    return entry, {"source": sources, "accepted": accepted}


def _vkey(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[.]|(?<=\d)(?=[a-z])", version))


def write(
    derived: dict[str, tuple[dict, dict]], failed: dict[str, str], speculative: dict[str, dict]
) -> None:
    """Put the derived entries into the three fact files (keeping each version's hand-written note)."""
    ea_path, q_path, s_path = (
        fact_path(f"vllm_{n}") for n in ("engine_args", "quantization", "speculative")
    )
    ea, q, s = (json.loads(p.read_text()) for p in (ea_path, q_path, s_path))
    s["versions"] = dict(
        sorted({**s["versions"], **speculative}.items(), key=lambda kv: _vkey(kv[0]))
    )
    s["unrecorded"] = {**s.get("unrecorded", {}), **failed}
    for version in speculative:
        s["unrecorded"].pop(version, None)
    for version, (entry, marlin) in derived.items():
        note = ea["versions"].get(version, {}).get("note")
        ea["versions"][version] = {**entry, **({"note": note} if note else {})}
        q["marlin_override"]["by_version"][version] = marlin
        ea.get("unrecorded", {}).pop(version, None)
    ea["versions"] = dict(sorted(ea["versions"].items(), key=lambda kv: _vkey(kv[0])))
    by = q["marlin_override"]["by_version"] = dict(
        sorted(q["marlin_override"]["by_version"].items(), key=lambda kv: _vkey(kv[0]))
    )
    q["marlin_override"]["accepted"] = {
        m: sorted(set.intersection(*(set(v["accepted"][m]) for v in by.values())))
        for m in ("awq", "gptq")
    }
    if failed:
        ea["unrecorded"] = {**ea.get("unrecorded", {}), **failed}
    for path, doc in ((ea_path, ea), (q_path, q), (s_path, s)):
        path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


def main(args: list[str]) -> int:
    """WHEEL... [--no-wheel VERSION=WHY]... [--write]: derive each wheel; a version of the image table with no wheel
    (the registry has none) is written to `unrecorded` with WHY."""
    images = load("triton_images")["vllm_images"]

    def tags(version: str) -> list[str]:
        return sorted((t for t, row in images.items() if row["vllm"] == version), reverse=True)

    derived, speculative, lora, failed, no_lora, it = {}, {}, {}, {}, {}, iter(args)
    for a in it:
        if a == "--no-wheel":
            version, _, why = next(it).partition("=")
            failed[version] = {"wheel": None, "images": tags(version), "why": why}
            no_lora[version] = f"no wheel: {why}"
            continue
        if a == "--write":
            continue
        wheel = Path(a)
        version = wheel.name.split("-")[1]
        try:
            derived[version] = derive(wheel, tags(version))
            speculative[version] = vllm_spec_wheel.derive(wheel, tags(version))
        except (ValueError, StopIteration, KeyError, SyntaxError) as e:
            failed[version] = {
                "wheel": wheel.name,
                "images": tags(version),
                "why": f"{type(e).__name__}: {e}",
            }
            no_lora[version] = f"{wheel.name}: its other facts failed ({failed[version]['why']})"
            continue
        try:
            lora[version] = vllm_lora_wheel.derive(wheel)
        except (ValueError, StopIteration, KeyError, SyntaxError, AttributeError) as e:
            no_lora[version] = f"{wheel.name}: {type(e).__name__}: {e}"
    json.dump(
        {
            "derived": {
                v: {
                    "engine_args": e,
                    "quantization": q,
                    "speculative": speculative[v],
                    "lora": lora.get(v),
                }
                for v, (e, q) in derived.items()
            },
            "failed": failed,
            "no_lora": no_lora,
        },
        sys.stdout,
        indent=1,
    )
    sys.stdout.write("\n")
    if "--write" in args:
        write(derived, failed, speculative)
        vllm_lora_wheel.write(lora, no_lora)
    return 0
