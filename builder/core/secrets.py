"""Keep credentials out of every message tritonbuild prints, logs or stores: one redactor for all of
them."""

from __future__ import annotations

import os
import re

# scheme://user:password@host → scheme://***@host (any user-info: a bare token before '@' is a
# secret too)
USERINFO_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s]+@")
# query or form parameters whose name says secret: AWS presigned (X-Amz-Signature, X-Amz-Credential,
# X-Amz-Security-Token, AWSAccessKeyId, Signature), Azure SAS (sig), GCS (X-Goog-Signature), OAuth
# tokens...
SECRET_RE = re.compile(
    r"(?i)([\w.-]*(?:secret|token|password|passwd|pwd|signature|credential|key|keyid|sig|"
    r"auth|sas)[\w.-]*)=([^&\s#\"']+)"
)
# Variables whose values are secrets: tritonbuild's own, and each registered store's (its driver's
# secret_env, declared by core/stores.py:register, which this module sits below: the CLI and the
# api import core/stores.py, so its drivers are registered before anything is printed)
OWN_SECRET_ENV = ("TRITONBUILD_REPORT_KEY",)
STORE_SECRET_ENV: list[str] = []


def declare_secret_env(names: tuple[str, ...]) -> None:
    """Redact these variables' values from now on (a store's, as its driver is registered)."""
    STORE_SECRET_ENV.extend(name for name in names if name not in STORE_SECRET_ENV)


def redact(text: str) -> str:
    """Drop anything secret-looking from a message or URL: user-info, secret query parameters, and
    the values of secret environment variables wherever they appear."""
    text = USERINFO_RE.sub(r"\1***@", text)
    text = SECRET_RE.sub(r"\1=***", text)
    for var in (*STORE_SECRET_ENV, *OWN_SECRET_ENV):
        value = os.environ.get(var)
        if value and len(value) >= 6:
            text = text.replace(value, "***")
    return text


def has_userinfo(url: str) -> bool:
    return USERINFO_RE.match(url.strip()) is not None
