"""A place on a store, parsed once from the URL a user gave (core/stores.py:parse_location) and
passed typed from there to the drivers, the publisher, the lock and the remote cache."""

from __future__ import annotations

from dataclasses import dataclass

from tritonbuild.core.secrets import redact


@dataclass(frozen=True)
class Location:
    """A place on a store: scheme, path (bucket/prefix, or an absolute path for file://; no trailing
    slash) and the endpoint of an S3-compatible service. Never holds credentials."""

    scheme: str
    path: str
    endpoint: str | None = None

    @property
    def raw(self) -> str:
        """The URL for the driver (unredacted: a secret in an environment value may appear in
        it)."""
        return f"{self.scheme}://{self.path}"

    @property
    def url(self) -> str:
        """The URL to print and store."""
        return redact(self.raw)

    def __str__(self) -> str:
        return self.url
