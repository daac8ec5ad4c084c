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
SECRET_ENV = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CONNECTION_STRING",
    "GOOGLE_APPLICATION_CREDENTIALS_JSON",
    "TRITONBUILD_REPORT_KEY",
)


def redact(text: str) -> str:
    """Drop anything secret-looking from a message or URL: user-info, secret query parameters, and
    the values of secret environment variables wherever they appear."""
    text = USERINFO_RE.sub(r"\1***@", text)
    text = SECRET_RE.sub(r"\1=***", text)
    for var in SECRET_ENV:
        value = os.environ.get(var)
        if value and len(value) >= 6:
            text = text.replace(value, "***")
    return text


def has_userinfo(url: str) -> bool:
    return USERINFO_RE.match(url.strip()) is not None
