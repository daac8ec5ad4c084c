"""Where models are published and caches are shared: URLs parsed into one type, and the drivers by
scheme.

A `Location` (core/location.py) is parsed once, where a command receives the URL, and travels typed
from there. A `Driver` (core/drivers.py; the object stores' in core/cloud_drivers.py) holds
everything tritonbuild knows about one kind of store: its schemes, the fsspec filesystem it opens
(its options cut to the network deadline, every small call bounded by it: core/objstore.py), the
conditional-write primitives the publish lock is built on (core/leases.py), how tritonserver spells
the same place, where its credentials come from, and what it can do (atomic renames on one host;
multipart uploads a killed writer leaves behind). The publisher, the lock and the remote cache ask
the driver; none of them tests a scheme.

Credentials come only from each store's standard chain (env, profiles, instance metadata);
tritonbuild never reads, prints or stores them.
"""

from __future__ import annotations

import dataclasses

from tritonbuild.core.cloud_drivers import AzureDriver, GCSDriver, S3Driver
from tritonbuild.core.drivers import Driver, LocalDriver
from tritonbuild.core.location import Location
from tritonbuild.core.secrets import declare_secret_env, has_userinfo, redact
from tritonbuild.errors import PublishError


def split_url(text: str) -> tuple[str | None, str]:
    """(scheme, rest) of 'scheme://rest'; (None, text) for a plain path. The one test of "is this a
    URL"."""
    if "://" in text:
        scheme, rest = text.split("://", 1)
        return scheme, rest
    return None, text


def is_url(text: str) -> bool:
    """Whether text names a store by URL (scheme://...). file:// is one, the file store's: a recipe
    source or checkpoint given as file://PATH is fetched and pinned like s3://, a plain path is read
    where it lies."""
    return split_url(str(text))[0] is not None


def with_scheme(address: str, default: str = "http") -> str:
    """A server address as a URL: 'host:port' gets default://; a URL is kept as it is."""
    return address if is_url(address) else f"{default}://{address}"


def parse_location(text: str, endpoint: str | None = None) -> Location:
    """The URL a user gave, checked (a scheme a driver serves, no credentials, what its store
    needs)."""
    text = str(text)
    if has_userinfo(text):
        raise PublishError(
            "credentials in the target URL are not accepted (they would end up in logs, receipts "
            "and the shell history)",
            where=redact(text),
            hint="drop 'user:secret@' from the URL; give credentials through the store's own chain "
            f"({'; '.join(d.credentials for d in drivers() if d.credentials)})",
        )
    scheme, rest = split_url(text)
    if scheme is None:
        raise PublishError(
            f"target {redact(text)!r} is not a URL", where=redact(text), hint=f"use {_examples()}"
        )
    driver = driver_for(scheme, redact(text))
    location = Location(
        scheme, rest.rstrip("/") if rest.strip("/") else "", driver.endpoint(endpoint)
    )
    driver.check(location)
    return location


def as_location(where: Location | str, endpoint: str | None = None) -> Location:
    """A Location as it is (an endpoint given here replaces its own); a string parsed (the Python
    API's edge)."""
    if isinstance(where, Location):
        return dataclasses.replace(where, endpoint=endpoint) if endpoint else where
    return parse_location(where, endpoint)


DRIVERS: dict[str, Driver] = {}


def register(driver: Driver) -> None:
    """A store tritonbuild serves from now on: its schemes parsed, its secrets redacted, and what
    iterates over drivers() (the launcher, deploy-snippets, the CLI's help) told of it."""
    for scheme in driver.schemes:
        DRIVERS[scheme] = driver
    declare_secret_env(driver.secret_env)


# A new store: its driver, and one entry here
for _driver in (LocalDriver(), S3Driver(), GCSDriver(), AzureDriver()):
    register(_driver)


def drivers() -> tuple[Driver, ...]:
    """Each registered store once, in the order registered."""
    return tuple(dict.fromkeys(DRIVERS.values()))


def served_drivers() -> tuple[Driver, ...]:
    """The stores tritonserver reads a repository from itself (a pod, a container)."""
    return tuple(d for d in drivers() if d.triton_scheme)


def url_prefixes(served: bool = False) -> str:
    """'s3://, gs://, ...': the stores' URLs as the CLI's help names them (object stores first); with
    served, only those tritonserver reads itself."""
    chosen = served_drivers() if served else sorted(drivers(), key=lambda d: d.local)
    return ", ".join(f"{d.schemes[0]}://" for d in chosen)


def url_examples() -> tuple[str, ...]:
    """One URL of each store (s3://bucket/prefix, ...; object stores first)."""
    return tuple(d.example() for d in sorted(drivers(), key=lambda d: d.local))


def _examples() -> str:
    return ", ".join(dict.fromkeys(d.example() for d in DRIVERS.values()))


def open_url(url: str):
    """(filesystem, path) for a source URL: through its store's driver where one is registered (its
    options cut to the network deadline, one retry layer), else fsspec's own (https://,
    hf://...)."""
    scheme, rest = split_url(url)
    driver = DRIVERS.get(scheme or "")
    if driver is None:
        from fsspec.core import url_to_fs

        return url_to_fs(url)
    return driver.open(Location(scheme, rest, driver.endpoint(None)))


def driver_for(scheme: str, where: str | None = None) -> Driver:
    driver = DRIVERS.get(scheme)
    if driver is None:
        raise PublishError(
            f"unsupported target scheme {scheme!r} (known: "
            f"{', '.join(f'{s}://' for s in DRIVERS)})",
            where=where or f"{scheme}://",
            hint=f"use {_examples()}",
        )
    return driver
