"""Keep credentials out of every message tritonbuild prints or stores."""

from __future__ import annotations

import os
import re

SECRET_RE = re.compile(r"(?i)(secret|token|password|signature|credential|key)=([^&\s]+)")
SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN",
              "GOOGLE_APPLICATION_CREDENTIALS_JSON")


def redact(text: str) -> str:
    """Drop anything secret-looking from a message (query-string credentials, values of secret env vars)."""
    text = SECRET_RE.sub(r"\1=***", text)
    for var in SECRET_ENV:
        value = os.environ.get(var)
        if value and len(value) >= 6:
            text = text.replace(value, "***")
    return text
