"""A safetensors file's header, as both LLM runtimes' steps read it: an 8-byte little-endian length,
then that many bytes of JSON ({name: {dtype, shape, data_offsets}}, and __metadata__)."""

from __future__ import annotations

import json
from pathlib import Path

MAX_HEADER = 100 << 20  # safetensors' own limit on the header's size


def raw_header(path: Path) -> tuple[int, dict] | None:
    """(where the data starts, the header without __metadata__), or None when the file holds no such
    header."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        length = int.from_bytes(head, "little") if len(head) == 8 else -1
        if not 0 < length <= min(size - 8, MAX_HEADER):
            return None
        try:
            header = json.loads(f.read(length))
        except (UnicodeDecodeError, ValueError):
            return None
    if not isinstance(header, dict):
        return None
    header.pop("__metadata__", None)
    return 8 + length, header
