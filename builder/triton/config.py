"""config.pbtxt as Triton's ModelConfig proto, printed with text_format and parsed back: never
string-templated. Shared by the repository stage and the backends; it knows no recipe (tensors are
anything shaped like one)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from google.protobuf import text_format

from tritonbuild.core.fsutil import write_atomic

CONFIG_FILE = "config.pbtxt"
KINDS = {"cpu": "KIND_CPU", "gpu": "KIND_GPU", "auto": "KIND_AUTO", "model": "KIND_MODEL"}


def model_config_pb2():
    """Triton's ModelConfig messages and enums (from tritonclient's schema, any protobuf >=
    4.21)."""
    from tritonbuild.triton.schema import model_config_pb2 as schema

    return schema()


class Tensor(Protocol):
    """What a ModelInput/ModelOutput is written from (a recipe's TensorSpec is one)."""

    name: str
    dtype: str
    dims: Sequence[int]
    optional: bool


def enum_name(message, field: str, value: int) -> str:
    """The name of an enum field's value in a parsed config ('KIND_GPU' for instance_group.kind
    1)."""
    return message.DESCRIPTOR.fields_by_name[field].enum_type.values_by_number[value].name


def data_type(dtype: str) -> str:
    """Triton's DataType name for a short dtype name: fp16 -> TYPE_FP16; bytes is Triton's
    TYPE_STRING."""
    return "TYPE_STRING" if dtype == "bytes" else f"TYPE_{dtype.upper()}"


def add_tensors(field, specs: Iterable[Tensor], pb2, is_input: bool) -> None:
    """Append ModelInput/ModelOutput entries for specs (optional is an input-only field)."""
    for s in specs:
        t = field.add()
        t.name = s.name
        t.data_type = pb2.DataType.Value(data_type(s.dtype))
        t.dims.extend(s.dims)
        if is_input and s.optional:
            t.optional = True


def render(mc) -> bytes:
    """text_format in field order; max_batch_size is written even when 0 (proto3 would drop it)."""
    text = text_format.MessageToString(mc)
    if mc.max_batch_size == 0:
        lines = text.splitlines(keepends=True)
        at = next(
            (
                i
                for i, line in enumerate(lines)
                if line.startswith(("input", "output", "version_policy"))
            ),
            len(lines),
        )
        lines.insert(at, "max_batch_size: 0\n")
        text = "".join(lines)
    data = text.encode()
    if parse(data) != mc:
        raise AssertionError("config.pbtxt does not parse back to the same ModelConfig")
    return data


class ConfigParseError(text_format.ParseError):
    """config.pbtxt text that is not a ModelConfig (or not UTF-8); str() is the reason, with
    line:col when the text format parser gives them."""


def parse(data: bytes):
    """Parse config.pbtxt text as Triton's ModelConfig; raises ConfigParseError with line:col."""
    mc = model_config_pb2().ModelConfig()
    try:
        text_format.Parse(data.decode(), mc)
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise ConfigParseError(str(e)) from None
    return mc


def write_config(model_dir: Path, config) -> bytes:
    """The one writer of a model's config.pbtxt: config (a ModelConfig, rendered; or bytes, written
    as they are: a stand-in passes on a config that does not parse) written atomically, the model
    directory made if needed. Returns the bytes written."""
    data = config if isinstance(config, bytes) else render(config)
    write_atomic(model_dir / CONFIG_FILE, data)
    return data


def config_bytes(model_dir: Path) -> bytes:
    """model_dir's config.pbtxt as written (what publish copies and compares byte for byte)."""
    return (model_dir / CONFIG_FILE).read_bytes()


def read_config(model_dir: Path):
    """model_dir's config.pbtxt as ModelConfig: the one reader of a model's config file.
    FileNotFoundError when there is none (Triton autocompletes one); ConfigParseError when it is not
    a ModelConfig."""
    return parse(config_bytes(model_dir))


def read_config_or_none(model_dir: Path):
    """read_config, or None when the file cannot be read or parsed (the caller leaves such a model
    to the check that reports it)."""
    try:
        return read_config(model_dir)
    except (OSError, ConfigParseError):
        return None


_TOKEN = re.compile(
    r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|#[^\n]*|\n|[{}\[\]<>:,;]|[^\s{}\[\]<>:,;"\'#]+'
)


def field_lines(text: str) -> dict[str, int]:
    """Where each field of config.pbtxt text starts: dotted path → 1-based line, repeated messages
    indexed ('output[1].label_filename'; an index 0 is left out, so 'dynamic_batching.x' and
    'input.name' name the first). For messages that name a field; the parser (parse) judges the
    text."""
    out: dict[str, int] = {}
    frames: list[tuple[str, dict[str, int]]] = [("", {})]
    lists: list[str] = []  # the field of each open '[': its '{' are that field's messages
    line, field, after_colon = 1, "", False
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token == "\n" or token.startswith("#"):
            line += token == "\n"
            continue
        prefix, counts = frames[-1]
        if token in "{<":
            name = lists[-1] if lists and not field else field
            index = counts.get(name, 0)
            counts[name] = index + 1
            path = f"{prefix}{name}" + (f"[{index}]" if index else "")
            out.setdefault(path, line)
            frames.append((path + ".", {}))
            field = ""
        elif token in "}>":
            frames.pop() if len(frames) > 1 else None
        elif token == "[":
            lists.append(field) if field else None
            field = ""
        elif token == "]":
            lists.pop() if lists else None
        elif token == ":":
            after_colon = True
            continue
        elif token not in ",;" and not after_colon and re.match(r"[A-Za-z_]\w*$", token):
            field = token
            out.setdefault(f"{prefix}{token}", line)
            continue
        after_colon = False
        if token not in "{<[":
            field = field if token in ",;" else ""
    return out


def field_line(lines: dict[str, int], path: str) -> int | None:
    """The line of path (field_lines' spelling, '[0]' allowed) or of its nearest enclosing field."""
    parts = re.sub(r"\[0\]", "", path).split(".")
    while parts:
        if ".".join(parts) in lines:
            return lines[".".join(parts)]
        parts.pop()
    return None
