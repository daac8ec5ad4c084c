"""TensorRT-LLM's LLM-API argument facts at one release, derived whole from `tensorrt_llm/llmapi/llm_args.py`:

    python -m tests.contracts.refresh trtllm-llmapi 1.1.0 --git GITDIR [--tag v1.1.0] [--write]
    python -m tests.contracts.refresh trtllm-llmapi 1.1.0 --wheel WHEEL_OR_URL [--sha256 HEX] [--write]

GITDIR is a TensorRT-LLM clone (a blob-less one does: `git clone --filter=blob:none`); the file is read with
`git show TAG:PATH` and the tag's commit recorded. A wheel is read as a zip; a URL (the wheel URL a package
index lists, with the sha256 it lists: `--sha256` is then required) is opened by HTTP range requests, so only
the zip directory and this one member are downloaded, never the multi-GB wheel. A local wheel's sha256 is
computed (and compared with `--sha256` when given).

What is derived, each fact with the line it was read at: every decoding config class (DecodingBaseConfig and
its subclasses) with its `decoding_type` tag and whether the tag is a ClassVar or a field; the extra-field
policy those classes and the LLM-API argument classes inherit (StrictBaseModel's); `DecodingBaseConfig.from_dict`
and the keys it maps; the SpeculativeConfig union (members, discriminator); `update_llm_args_with_extra_dict`
(the fields it converts, and where it calls from_dict); the LLM-API arguments tritonbuild writes
(`LLM_API_ARGS`: the class that declares each, its annotation) and CapacitySchedulerPolicy's members.
Prints the entry of facts/llm_args.json `releases`; --write puts it there and drops the version from
`releases_unread`. Standard library only."""

from __future__ import annotations

import ast
import hashlib
import io
import json
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

PATH = "tensorrt_llm/llmapi/llm_args.py"
FACTS = Path(__file__).parent / "facts" / "llm_args.json"
# the LLM() arguments tritonbuild writes into model.yaml (backends/tensorrtllm/llmapi/keys.py: LLM_API_FIELDS, the
# scheduler, speculative, LoRA, KV cache and guided decoding settings); test_refresh keeps it to keys.py
LLM_API_ARGS = (
    "max_beam_width",
    "max_input_len",
    "enable_chunked_prefill",
    "scheduler_config",
    "speculative_config",
    "lora_config",
    "kv_cache_config",
    "guided_decoding_backend",
)


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _chain(name: str, classes: dict) -> list[str]:
    """The class and its bases defined in the same file, nearest first (depth-first, left to right)."""
    out: list[str] = []

    def walk(n: str) -> None:
        if n in classes and n not in out:
            out.append(n)
            for base in classes[n].bases:
                walk(ast.unparse(base).split("[")[0])

    walk(name)
    return out


def _string(node: ast.AST | None) -> str | None:
    """A str constant, the default of a Field(...) call, or the one value of a Literal[...]."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Call):
        for kw in node.keywords:
            if kw.arg == "default":
                return _string(kw.value)
        return _string(node.args[0]) if node.args else None
    if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("Literal"):
        return _string(node.slice)
    return None


def _tag(cls: ast.ClassDef) -> dict | None:
    for stmt in cls.body:
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        if getattr(target, "id", None) != "decoding_type":
            continue
        annotation = ast.unparse(stmt.annotation) if isinstance(stmt, ast.AnnAssign) else None
        kind = "field" if annotation and not annotation.startswith("ClassVar") else "ClassVar"
        if annotation is None:
            kind = "class attribute"
        value = _string(stmt.value) or _string(getattr(stmt, "annotation", None))
        return {
            "decoding_type": value,
            "declared_as": kind,
            "annotation": annotation,
            "line": stmt.lineno,
        }
    return None


def _extra_policy(cls: ast.ClassDef) -> dict | None:
    """model_config = ConfigDict(extra=...) / {"extra": ...}, or an inner `class Config: extra = ...`."""
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and ast.unparse(stmt.targets[0]) == "model_config":
            value = stmt.value
            if isinstance(value, ast.Call):
                for kw in value.keywords:
                    if kw.arg == "extra":
                        return {"extra": _string(kw.value), "line": stmt.lineno}
            if isinstance(value, ast.Dict):
                for key, item in zip(value.keys, value.values, strict=True):
                    if _string(key) == "extra":
                        return {"extra": _string(item), "line": stmt.lineno}
        if isinstance(stmt, ast.ClassDef) and stmt.name == "Config":
            for inner in stmt.body:
                if isinstance(inner, ast.Assign) and ast.unparse(inner.targets[0]) == "extra":
                    return {"extra": _string(inner.value), "line": inner.lineno}
    return None


def extra_policy(name: str, classes: dict) -> dict | None:
    """The extra-field policy a class inherits: the nearest class of its chain that sets one."""
    for n in _chain(name, classes):
        policy = _extra_policy(classes[n])
        if policy:
            return {"class": n, **policy}
    return None


def _dict_literal(node: ast.AST) -> dict | None:
    for d in ast.walk(node):
        if isinstance(d, ast.Dict) and len(d.keys) >= 2 and all(_string(k) for k in d.keys):
            return {_string(k): ast.unparse(v) for k, v in zip(d.keys, d.values, strict=True)}
    return None


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == name), None)


def decoding_facts(tree: ast.Module) -> dict:
    """The decoding config classes with their tags, from_dict, the SpeculativeConfig union."""
    classes = _classes(tree)
    configs = {
        name: _tag(cls)
        for name, cls in classes.items()
        if name != "DecodingBaseConfig" and "DecodingBaseConfig" in _chain(name, classes)
    }
    base = classes["DecodingBaseConfig"]
    from_dict = _method(base, "from_dict")
    union = next(
        (
            n
            for n in tree.body
            if isinstance(n, ast.Assign | ast.AnnAssign)
            and "SpeculativeConfig"
            in ast.unparse(n.targets[0] if isinstance(n, ast.Assign) else n.target)
        ),
        None,
    )
    out = {
        "DecodingBaseConfig": {"line": base.lineno, "bases": [ast.unparse(b) for b in base.bases]},
        "decoding_configs": configs,
        "extra": extra_policy("DecodingBaseConfig", classes),
        "from_dict": None,
        "union": None,
    }
    if from_dict is not None:
        out["from_dict"] = {"line": from_dict.lineno, "types": _dict_literal(from_dict)}
    if union is not None:
        names = [n.id for n in ast.walk(union.value) if isinstance(n, ast.Name) and n.id in configs]
        discriminator = next(
            (
                _string(kw.value)
                for c in ast.walk(union.value)
                if isinstance(c, ast.Call)
                for kw in c.keywords
                if kw.arg == "discriminator"
            ),
            None,
        )
        out["union"] = {"line": union.lineno, "members": names, "discriminator": discriminator}
    return out


def update_facts(tree: ast.Module) -> dict | None:
    """update_llm_args_with_extra_dict: its line, the fields it converts, the lines where it calls from_dict."""
    fn = next(
        (
            n
            for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name == "update_llm_args_with_extra_dict"
        ),
        None,
    )
    if fn is None:
        return None
    calls = sorted(
        c.lineno
        for c in ast.walk(fn)
        if isinstance(c, ast.Call)
        and isinstance(c.func, ast.Attribute)
        and c.func.attr == "from_dict"
    )
    return {"line": fn.lineno, "converts": _dict_literal(fn) or {}, "from_dict_calls": calls}


def argument_facts(tree: ast.Module) -> dict:
    """Where each LLM_API_ARGS field is declared in TorchLlmArgs' chain, the extra policy it inherits, and the
    CapacitySchedulerPolicy members."""
    classes = _classes(tree)
    chain = _chain("TorchLlmArgs", classes)
    args: dict = {}
    for name in LLM_API_ARGS:
        args[name] = None
        for cls in chain:
            stmt = next(
                (
                    s
                    for s in classes[cls].body
                    if isinstance(s, ast.AnnAssign) and getattr(s.target, "id", None) == name
                ),
                None,
            )
            if stmt is not None:
                args[name] = {
                    "class": cls,
                    "annotation": ast.unparse(stmt.annotation),
                    "line": stmt.lineno,
                }
                break
    policy = classes.get("CapacitySchedulerPolicy")
    members = [
        s.targets[0].id
        for s in (policy.body if policy else [])
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)
    ]
    return {
        "TorchLlmArgs": {"line": classes["TorchLlmArgs"].lineno, "chain": chain},
        "extra": extra_policy("TorchLlmArgs", classes),
        "arguments": args,
        "CapacitySchedulerPolicy": {"line": policy.lineno, "members": members} if policy else None,
    }


def llm_args_facts(text: str) -> dict:
    tree = ast.parse(text)
    missing = {"DecodingBaseConfig", "TorchLlmArgs"} - set(_classes(tree))
    if missing:
        raise SystemExit(
            f"{PATH} declares no {', '.join(sorted(missing))}: not an LLM-API llm_args.py"
        )
    return {
        "speculative": decoding_facts(tree),
        "update_llm_args_with_extra_dict": update_facts(tree),
        "llm_args": argument_facts(tree),
    }


class HttpRange(io.RawIOBase):
    """A seekable, read-only file over HTTP range requests (for zipfile); counts the bytes it fetched."""

    def __init__(self, url: str):
        self.url, self.position, self.fetched = url, 0, 0
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD")) as r:
            self.size = int(r.headers["Content-Length"])

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.position = {0: 0, 1: self.position, 2: self.size}[whence] + offset
        return self.position

    def tell(self) -> int:
        return self.position

    def readinto(self, buffer) -> int:
        end = min(self.position + len(buffer), self.size)
        if end <= self.position:
            return 0
        request = urllib.request.Request(self.url)
        request.add_header("Range", f"bytes={self.position}-{end - 1}")
        with urllib.request.urlopen(request) as r:
            if r.status != 206:
                raise RuntimeError(
                    f"{self.url}: the server ignores range requests (HTTP {r.status})"
                )
            data = r.read()
        buffer[: len(data)] = data
        self.position += len(data)
        self.fetched += len(data)
        return len(data)


def from_wheel(wheel: str, sha256: str | None) -> tuple[str, dict]:
    """llm_args.py out of a wheel (a path, or a URL read by ranges) and the wheel's identity."""
    name = wheel.rsplit("/", 1)[-1]
    if wheel.startswith(("http://", "https://")):
        if not sha256:
            raise SystemExit("a wheel URL needs --sha256 (the digest the package index lists)")
        handle = HttpRange(wheel)
        stream = io.BufferedReader(handle, buffer_size=1 << 16)
    else:
        digest = hashlib.sha256(Path(wheel).read_bytes()).hexdigest()
        if sha256 and sha256 != digest:
            raise SystemExit(f"{wheel}: sha256 {digest}, not the {sha256} given")
        sha256, handle, stream = digest, None, open(wheel, "rb")  # noqa: SIM115
    with stream, zipfile.ZipFile(stream) as zf:
        text = zf.read(PATH).decode()
    meta = {"package": "tensorrt-llm", "wheel": name, "wheel_sha256": sha256}
    if handle is not None:
        meta["bytes_read"] = handle.fetched
    return text, meta


def from_git(git_dir: str, tag: str) -> tuple[str, dict]:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "--git-dir", git_dir, *args], capture_output=True, text=True, check=True
        ).stdout

    commit = git("rev-parse", f"{tag}^{{commit}}").strip()
    return git("show", f"{tag}:{PATH}"), {"commit": commit}


def release_entry(version: str, tag: str, text: str, meta: dict) -> dict:
    source = {
        "repository": "NVIDIA/TensorRT-LLM",
        "tag": tag,
        "commit": meta.get("commit"),
        "path": PATH,
        "lines": "per fact (line)",
    }
    if "wheel_sha256" in meta:
        source.update(version=version, **{k: v for k, v in meta.items() if k != "bytes_read"})
    return {"source": source, **llm_args_facts(text)}


def write(version: str, entry: dict, path: Path | None = None) -> None:
    path = path or FACTS
    doc = json.loads(path.read_text())
    doc.setdefault("releases", {})[version] = entry
    doc.get("releases_unread", {}).pop(version, None)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="refresh trtllm-llmapi", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("version")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--git", metavar="GITDIR")
    where.add_argument("--wheel", metavar="WHEEL_OR_URL")
    parser.add_argument("--sha256")
    parser.add_argument("--tag")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    tag = args.tag or f"v{args.version}"
    text, meta = from_git(args.git, tag) if args.git else from_wheel(args.wheel, args.sha256)
    entry = release_entry(args.version, tag, text, meta)
    if args.write:
        write(args.version, entry)
    sys.stdout.write(json.dumps(entry, indent=1) + "\n")
    if "bytes_read" in meta:
        sys.stderr.write(f"read {meta['bytes_read']} bytes of the wheel by range requests\n")
    return 0


def accepted_tag(entry: dict, config_class: str) -> str | None:
    """The decoding_type a model.yaml speculative_config dict must carry to become config_class at the release
    `entry` records, or None where that release takes no dict for it: through update_llm_args_with_extra_dict's
    from_dict (its key for the class), else through the union discriminated on decoding_type (the class's
    Literal field)."""
    spec, update = entry["speculative"], entry["update_llm_args_with_extra_dict"] or {}
    converted = update.get("converts", {}).get("speculative_config")
    if converted and update.get("from_dict_calls") and spec["from_dict"]:
        types = spec["from_dict"]["types"] or {}
        return next((key for key, name in types.items() if name == config_class), None)
    union, tag = spec["union"] or {}, spec["decoding_configs"].get(config_class) or {}
    if (
        union.get("discriminator") == "decoding_type"
        and config_class in union.get("members", [])
        and tag.get("declared_as") == "field"
    ):
        return tag["decoding_type"]
    return None
