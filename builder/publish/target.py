"""Publish targets through fsspec: file://, s3:// (any S3-compatible endpoint), gs://, az:// (abfs).

Credentials come only from each driver's standard chain (env, profiles, instance metadata); tritonbuild
never reads, prints or stores them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlparse

from tritonbuild.core.objstore import (
    BoundedFS,
    classify,
    deadline_words,
    one_retry_layer,
    storage_options,
    within_deadline,
)
from tritonbuild.core.secrets import has_userinfo, redact
from tritonbuild.errors import PublishError

DRIVERS = {"s3": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs", "abfs": "adlfs"}
@dataclass
class Target:
    url: str  # as the user gave it, without a trailing slash
    protocol: str
    root: str  # the path the filesystem understands (bucket/prefix or a local absolute path)
    fs: object
    endpoint_url: str | None

    @property
    def is_local(self) -> bool:
        return self.protocol in ("file", "local")

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def triton_url(self) -> str:
        """The --model-repository string tritonserver understands for this target."""
        if self.is_local:
            return self.root
        if self.protocol == "s3" and self.endpoint_url:
            ep = urlparse(self.endpoint_url)
            port = ep.port or (443 if ep.scheme == "https" else 80)
            return f"s3://{ep.scheme}://{ep.hostname}:{port}/{self.root}"
        if self.protocol in ("az", "abfs"):
            account = os.environ.get("AZURE_STORAGE_ACCOUNT", "ACCOUNT")
            return f"as://{account}/{self.root}"
        return f"{self.protocol}://{self.root}"


def open_target(url: str, *, endpoint_url: str | None = None) -> Target:
    import fsspec
    from fsspec.core import url_to_fs

    if has_userinfo(url):
        raise PublishError("credentials in the target URL are not accepted (they would end up in logs, receipts "
                           "and the shell history)", where=redact(url),
                           hint="drop 'user:secret@' from the URL; give credentials through the driver's own chain "
                                "(AWS_PROFILE / AWS_ACCESS_KEY_ID..., GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_*)")
    if "://" not in url:
        raise PublishError(f"target {redact(url)!r} is not a URL", where=redact(url),
                           hint="use file:///abs/path, s3://bucket/prefix, gs://bucket/prefix or az://container/prefix")
    protocol, rest = url.split("://", 1)
    raw = f"{protocol}://{rest.rstrip('/')}" if rest.strip("/") else f"{protocol}://"
    url = redact(raw)  # NOTE: what we print and store; the driver gets raw
    if protocol not in ("file", *DRIVERS):
        raise PublishError(f"unsupported target scheme {protocol!r}", where=url,
                           hint="use file://, s3://, gs:// or az://")
    endpoint_url = endpoint_url or (os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
                                    if protocol == "s3" else None)
    options = storage_options(protocol, endpoint_url)
    if protocol == "file":
        path = url[len("file://"):]
        if not path.startswith("/"):
            raise PublishError(f"file target {url!r} needs an absolute path", where=url,
                               hint="write file:///absolute/path (three slashes)")
    try:
        # NOTE: under the deadline: a driver may ask the network for credentials while it is made (gcsfs)
        fs, root = within_deadline(lambda: url_to_fs(raw, **options), f"open {protocol}://")
    except ImportError:
        driver = DRIVERS.get(protocol, "?")
        raise PublishError(f"the {protocol}:// driver ({driver}) is not installed", where=url,
                           hint=f"pip install 'tritonbuild[{protocol}]' (or pip install {driver})") from None
    except ValueError as e:
        raise PublishError(f"bad target URL: {redact(str(e))}", where=url, hint="check the URL") from None
    except Exception as e:  # noqa: BLE001 - no answer within the deadline, or the driver refused its options
        raise storage_error(Target(url, protocol, "", None, endpoint_url), f"open the {protocol}:// driver", e) \
            from None
    one_retry_layer(fs)
    if protocol != "file" and not root.strip("/"):
        raise PublishError("the target names no bucket", where=url, hint=f"use {protocol}://bucket/prefix")
    del fsspec
    return Target(url=url, protocol=protocol, root=root, fs=fs if protocol == "file" else BoundedFS(fs),
                  endpoint_url=endpoint_url)


def storage_error(target: Target, action: str, e: BaseException) -> PublishError:
    """A driver exception as a PublishError that names the target and the likely fix, with no secrets; the
    fix is chosen by the service's error code and the exception's type, never by words in its message."""
    text = redact(f"{type(e).__name__}: {e}")
    kind = classify(e)
    hint = {"no-bucket": "create the bucket first, or fix its name",
            "denied": "check credentials (AWS_PROFILE / AWS_ACCESS_KEY_ID / instance role, "
                      "GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_*) and bucket permissions",
            "network": "check the endpoint (--endpoint-url / AWS_ENDPOINT_URL, STORAGE_EMULATOR_HOST, the Azure "
                       "connection string) and that it is reachable and answers; a slow but working store may "
                       "need a longer deadline",
            "not-found": "check the target URL"}.get(kind, "check the target URL and permissions")
    if kind == "network" and "network deadline" not in text:
        text = f"no answer within {deadline_words()}: {text}"
    return PublishError(f"cannot {action}: {text}", where=target.url, hint=hint)
