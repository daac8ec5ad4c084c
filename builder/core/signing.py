"""Binding a verification report to a secret: HMAC-SHA256, so that publish accepts only a report
that a holder of the key wrote for exactly that manifest.

The key is TRITONBUILD_REPORT_KEY when set (a CI secret, the same where `verify` runs and where
`publish` runs), else this machine's own key: 32 random bytes in
$XDG_CONFIG_HOME/tritonbuild/report.key (mode 0600), made by the first `verify`. So on one machine
verify → publish needs no setup, and a report edited after verify, copied from elsewhere or left by
an older run under another key never passes publish's gate; across machines (CI jobs) the secret is
what both sides share.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

KEY_ENV = "TRITONBUILD_REPORT_KEY"
ALGORITHM = "hmac-sha256"


def key_file() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config) / "tritonbuild" / "report.key"


def report_key() -> bytes | None:
    """The key publish checks reports with: TRITONBUILD_REPORT_KEY, else this machine's key (None if
    neither)."""
    value = os.environ.get(KEY_ENV, "")
    if value:
        return value.encode()
    try:
        data = key_file().read_bytes().strip()
    except OSError:
        return None
    return data or None


def signing_key() -> bytes | None:
    """The key verify signs with: report_key(), making this machine's key first when there is none
    (None only when it cannot be written: the report is then unsigned, and publish says why it
    refuses it)."""
    key = report_key()
    if key is not None:
        return key
    path = key_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
    except FileExistsError:
        pass  # made meanwhile by a concurrent verify: use that one
    except OSError:
        return None
    return report_key()


def key_source() -> str:
    return KEY_ENV if os.environ.get(KEY_ENV) else f"this machine's key ({key_file()})"


def sign(payload: bytes, key: bytes) -> str:
    return f"{ALGORITHM}:{hmac.new(key, payload, hashlib.sha256).hexdigest()}"


def check(payload: bytes, signature: str | None, key: bytes) -> bool:
    """Constant-time comparison; False for a missing or foreign-algorithm signature."""
    if not signature or not signature.startswith(f"{ALGORITHM}:"):
        return False
    return hmac.compare_digest(sign(payload, key), signature)
