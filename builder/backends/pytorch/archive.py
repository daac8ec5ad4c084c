"""forward()'s arguments read from a TorchScript archive's own files, without importing torch.

A TorchScript file (torch.jit.save) is a zip: <root>/data.pkl pickles the module, its first global naming the root
class ('__torch__.embedder Embedder'), and <root>/code/__torch__/<module path>.py holds each class's serialized
code, forward()'s signature with every argument's type ('def forward(self: __torch__.embedder.Embedder, pixels:
Tensor) -> Tensor:'). Importing torch to load the file was most of verify's own CPU on the examples (with the
worker's fingerprint fix: 4.2 to 2.2 s median over 4 interleaved rounds, 2026-12-08, CHANGELOG), in a process whose
in-process runs happen in another one. Only what the backend's checks accept without a message is read here (Tensor
and List[...] arguments after self); any other signature, default value or layout returns None and torch reads the
file, so every refusal keeps torch's own wording of the type."""

from __future__ import annotations

import pickletools
import re
import zipfile
from pathlib import Path

_CLASS = "class {name}(Module):"
_ARGUMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.+)$")


def archive_arguments(model_file: Path) -> list[tuple[str, str]] | None:
    """forward()'s arguments as torch's schema gives them, (type kind, type string), self first as
    ('ClassType', '__torch__.M'); None where this reading does not apply (torch then reads the file)."""
    try:
        with zipfile.ZipFile(model_file) as archive:
            pickles = [
                n for n in archive.namelist() if n.count("/") == 1 and n.endswith("/data.pkl")
            ]
            if len(pickles) != 1:
                return None
            root = pickles[0].split("/")[0]
            module, name = _root_class(archive.read(pickles[0]))
            code = archive.read(f"{root}/code/{module.replace('.', '/')}.py").decode()
    except Exception:  # noqa: BLE001 - a file this reading cannot take is torch's to read (and to refuse)
        return None
    arguments = _forward_arguments(code, name)
    if arguments is None:
        return None
    read = []
    for position, (_, annotation) in enumerate(arguments):
        kind = _kind(annotation, self_of=f"{module}.{name}" if position == 0 else None)
        if kind is None:
            return None
        read.append((kind, annotation))
    return read


def _root_class(pickled: bytes) -> tuple[str, str]:
    """The pickled module's class: the first global the pickle names (protocol 2, as torch.jit.save writes)."""
    for opcode, argument, _ in pickletools.genops(pickled):
        if opcode.name == "PROTO":
            continue
        if opcode.name == "GLOBAL" and isinstance(argument, str) and argument.count(" ") == 1:
            module, name = argument.split(" ")
            if module.startswith("__torch__"):
                return module, name
        break
    raise ValueError("no root class")


def _forward_arguments(code: str, name: str) -> list[tuple[str, str]] | None:
    """(argument, annotation) of forward() in class name's serialized code; None if not found as expected."""
    lines = code.splitlines()
    try:
        start = lines.index(_CLASS.format(name=name))
    except ValueError:
        return None
    signature = []
    for line in lines[start + 1 :]:
        if line and not line.startswith(" "):
            break  # the next top-level class
        if signature or line.startswith("  def forward("):
            signature.append(line.strip())
            if re.search(r"\)\s*(->.*)?:$", line):
                break
    text = " ".join(signature)
    found = re.fullmatch(r"def forward\((.*)\)\s*(?:->.*)?:", text)
    if found is None:
        return None
    arguments = []
    for part in _top_level_split(found.group(1)):
        match = _ARGUMENT.match(part.strip())
        if match is None or "=" in part:
            return None  # no annotation, or a default value: torch reads it
        arguments.append((match.group(1), match.group(2).strip()))
    return arguments or None


def _top_level_split(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current] if current.strip() else parts


def _kind(annotation: str, self_of: str | None) -> str | None:
    if self_of is not None:
        return "ClassType" if annotation == self_of else None
    if annotation == "Tensor":
        return "TensorType"
    if annotation.startswith("List[") and annotation.endswith("]"):
        return "ListType"
    return None
