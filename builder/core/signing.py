"""Binding a verification report to a secret: HMAC-SHA256 with the key in TRITONBUILD_REPORT_KEY.

Without a key, a report is a claim anyone with write access to the repository can edit ("passed": true).
With the same key set where `verify` runs and where `publish` runs (a CI secret), publish accepts only a
report whose HMAC over its own canonical JSON (manifest digest and verdict included) checks out.
"""

from __future__ import annotations

import hashlib
import hmac
import os

KEY_ENV = "TRITONBUILD_REPORT_KEY"
ALGORITHM = "hmac-sha256"


def report_key() -> bytes | None:
    value = os.environ.get(KEY_ENV, "")
    return value.encode() if value else None


def sign(payload: bytes, key: bytes) -> str:
    return f"{ALGORITHM}:{hmac.new(key, payload, hashlib.sha256).hexdigest()}"


def check(payload: bytes, signature: str | None, key: bytes) -> bool:
    """Constant-time comparison; False for a missing or foreign-algorithm signature."""
    if not signature or not signature.startswith(f"{ALGORITHM}:"):
        return False
    return hmac.compare_digest(sign(payload, key), signature)
