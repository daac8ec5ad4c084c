"""Model and tensor names: each becomes a directory or file name in the repository and a name in
config.pbtxt, so it must be safe as both."""

from __future__ import annotations

import re

# NOTE: fullmatch: '$' would let a trailing newline pass
NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
# A model name is one directory name in the repository (and one path segment of an object key):
# Linux's NAME_MAX (255 bytes, <linux/limits.h>; os.pathconf(dir, "PC_NAME_MAX") says the same on
# ext4/xfs/tmpfs) bounds it.
NAME_MAX = 255
# A tensor name becomes a file name too (<model>/warmup/<tensor> for warmup data) and travels in
# config.pbtxt.
TENSOR_NAME_BAD = re.compile(r"[/\\\x00-\x1f\x7f]")


def valid_name(v: str, max_bytes: int = NAME_MAX) -> str:
    """A Triton model name that is also a safe directory name."""
    if not NAME_RE.fullmatch(v) or v in (".", ".."):
        raise ValueError(
            f"{v!r} is not a valid model name: use letters, digits, '_', '.', '-' and start with "
            "a letter, digit or '_' (no '/', '..', spaces, quotes or line breaks)"
        )
    if len(v.encode()) > max_bytes:
        raise ValueError(
            f"model name is {len(v.encode())} bytes long; the limit is {max_bytes} (it is a "
            f"directory name, and NAME_MAX is {NAME_MAX})"
        )
    return v


def valid_tensor_name(v: str) -> str:
    """A tensor name that is safe as a file name (warmup data) and in config.pbtxt."""
    bad = TENSOR_NAME_BAD.search(v)
    if bad or v in (".", "..") or v != v.strip():
        what = (
            f"character {bad.group()!r}"
            if bad
            else "surrounding spaces"
            if v != v.strip()
            else "a dot name"
        )
        raise ValueError(
            f"{v!r} is not a valid tensor name ({what}): no '/', '\\', control characters, "
            "surrounding spaces, '.' or '..'"
        )
    if len(v.encode()) > NAME_MAX:
        raise ValueError(f"tensor name is {len(v.encode())} bytes long; the limit is {NAME_MAX}")
    return v
