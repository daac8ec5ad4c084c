"""How tritonbuild talks to object stores through fsspec drivers: bounded time, one retry layer, errors
classified by their codes.

- Timeouts: connect 5 s, read TRITONBUILD_S3_READ_TIMEOUT (default 60 s) per request: an endpoint that
  accepts connections and never answers fails in bounded time instead of hanging. gs:// (gcsfs) and az://
  (adlfs) get the same two bounds through their own options (gcs_options, azure_options).
- Retries: botocore's own 'standard' mode (exponential backoff with jitter, transient errors only: throttling,
  5xx, timeouts, connection resets) with ATTEMPTS attempts in all; s3fs's retry loop is set to one attempt
  and tritonbuild adds none, so a failing request is tried ATTEMPTS times, not dozens.
"""

from __future__ import annotations

import os
import socket

CONNECT_TIMEOUT_S = 5
READ_TIMEOUT_ENV = "TRITONBUILD_S3_READ_TIMEOUT"
ATTEMPTS = 3

NO_BUCKET = {"NoSuchBucket"}
DENIED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
          "AllAccessDisabled", "AccountProblem", "InvalidClientTokenId", "UnrecognizedClientException"}


def read_timeout() -> float:
    try:
        value = float(os.environ.get(READ_TIMEOUT_ENV, "60"))
    except ValueError:
        value = 60.0
    return value if value > 0 else 60.0


def s3_options(endpoint_url: str | None) -> dict:
    """storage_options for fsspec's s3:// (s3fs)."""
    return {"client_kwargs": {"endpoint_url": endpoint_url} if endpoint_url else {},
            "config_kwargs": {"connect_timeout": CONNECT_TIMEOUT_S, "read_timeout": read_timeout(),
                              "retries": {"mode": "standard", "total_max_attempts": ATTEMPTS}},
            "skip_instance_cache": True}


def gcs_options() -> dict:
    """storage_options for gs:// (gcsfs): each HTTP request bounded by aiohttp's connect and between-reads
    timeouts (gcsfs's requests_timeout; unset, aiohttp waits forever on an endpoint that never answers; a total
    timeout would cut a large download short). Retries are gcsfs's own retry_request (a fixed 6 attempts in the
    driver, backoff with jitter, transient errors only; 404 never retried): tritonbuild adds none."""
    from aiohttp import ClientTimeout

    return {"requests_timeout": ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S, sock_read=read_timeout()),
            "skip_instance_cache": True}


def azure_options() -> dict:
    """storage_options for az:// and abfs:// (adlfs): its connection_timeout and read_timeout (seconds, handed to
    the Azure SDK's transport on every blob transfer; the SDK's default is 300 s each). Retries are the Azure
    storage SDK's own ExponentialRetry (3 retries, backoff with jitter, transient errors only): tritonbuild
    adds none."""
    return {"connection_timeout": CONNECT_TIMEOUT_S, "read_timeout": int(max(1, read_timeout())),
            "skip_instance_cache": True}


def storage_options(protocol: str, endpoint_url: str | None = None) -> dict:
    """The bounded-time options for a target's or a remote cache's driver (none for file://)."""
    if protocol == "s3":
        return s3_options(endpoint_url)
    if protocol in ("gs", "gcs"):
        return gcs_options()
    if protocol in ("az", "abfs", "abfss"):
        return azure_options()
    return {}


def one_retry_layer(fs) -> None:
    """s3fs retries timeouts and some client errors itself (5 times by default) on top of botocore: off."""
    if getattr(fs, "protocol", None) and "s3" in tuple(fs.protocol) and hasattr(fs, "retries"):
        fs.retries = 1


def _chain(e: BaseException):
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def error_code(e: BaseException) -> str | None:
    """The service's error code (S3 'NoSuchBucket', 'AccessDenied'...) anywhere in the exception's chain."""
    for x in _chain(e):
        response = getattr(x, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            if code:
                return str(code)
    return None


def classify(e: BaseException) -> str:
    """'no-bucket', 'denied', 'not-found', 'network' or 'other', from codes and exception types only."""
    code = error_code(e)
    if code in NO_BUCKET:
        return "no-bucket"
    if code in DENIED:
        return "denied"
    try:
        from botocore.exceptions import ConnectionError as BotoConnectionError
        from botocore.exceptions import HTTPClientError, NoCredentialsError
        network: tuple = (BotoConnectionError, HTTPClientError, socket.timeout, TimeoutError, ConnectionError)
        nocreds: tuple = (NoCredentialsError,)
    except ImportError:
        network, nocreds = (socket.timeout, TimeoutError, ConnectionError), ()
    try:
        import aiohttp

        network += (aiohttp.ClientConnectionError,)
    except ImportError:
        pass
    for x in _chain(e):
        if nocreds and isinstance(x, nocreds):
            return "denied"
        if isinstance(x, network):
            return "network"
    if code is None:
        first = next(_chain(e))
        if isinstance(first, PermissionError):
            return "denied"
        if isinstance(first, FileNotFoundError):
            return "not-found"
    return "other"
