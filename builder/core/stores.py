"""Where models are published and caches are shared: one URL type, and one driver per kind of store.

A `Location` is parsed once, where a command receives the URL, and travels typed from there. A `Driver` holds
everything tritonbuild knows about one kind of store: its schemes, the fsspec filesystem it opens (its options
cut to the network deadline, every small call bounded by it: core/objstore.py), the conditional-write
primitives the publish lock is built on (core/leases.py), how tritonserver spells the same place, where its
credentials come from, and what it can do (atomic renames on one host; multipart uploads a killed writer leaves
behind). The publisher, the lock and the remote cache ask the driver; none of them tests a scheme.

Credentials come only from each store's standard chain (env, profiles, instance metadata); tritonbuild never
reads, prints or stores them.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from tritonbuild.core import leases
from tritonbuild.core.fsutil import atomic_writer, write_atomic
from tritonbuild.core.objstore import (
    ATTEMPTS,
    BoundedFS,
    attempt_timeouts,
    classify,
    within_deadline,
)
from tritonbuild.core.secrets import has_userinfo, redact
from tritonbuild.errors import PublishError


def split_url(text: str) -> tuple[str | None, str]:
    """(scheme, rest) of 'scheme://rest'; (None, text) for a plain path. The one test of "is this a URL"."""
    if "://" in text:
        scheme, rest = text.split("://", 1)
        return scheme, rest
    return None, text


def is_url(text: str) -> bool:
    """Whether text names a store by URL (scheme://...). file:// is one, the file store's: a recipe source or
    checkpoint given as file://PATH is fetched and pinned like s3://, a plain path is read where it lies."""
    return split_url(str(text))[0] is not None


def with_scheme(address: str, default: str = "http") -> str:
    """A server address as a URL: 'host:port' gets default://; a URL is kept as it is."""
    return address if is_url(address) else f"{default}://{address}"


@dataclass(frozen=True)
class Location:
    """A place on a store: scheme, path (bucket/prefix, or an absolute path for file://; no trailing slash) and the
    endpoint of an S3-compatible service. Never holds credentials."""

    scheme: str
    path: str
    endpoint: str | None = None

    @property
    def raw(self) -> str:
        """The URL for the driver (unredacted: a secret in an environment value may appear in it)."""
        return f"{self.scheme}://{self.path}"

    @property
    def url(self) -> str:
        """The URL to print and store."""
        return redact(self.raw)

    @property
    def driver(self) -> Driver:
        return driver_for(self.scheme, self.url)

    def __str__(self) -> str:
        return self.url


def parse_location(text: str, endpoint: str | None = None) -> Location:
    """The URL a user gave, checked (a scheme a driver serves, no credentials, what its store needs)."""
    text = str(text)
    if has_userinfo(text):
        raise PublishError(
            "credentials in the target URL are not accepted (they would end up in logs, receipts "
            "and the shell history)",
            where=redact(text),
            hint="drop 'user:secret@' from the URL; give credentials through the store's own chain "
            "(AWS_PROFILE / AWS_ACCESS_KEY_ID..., GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_*)",
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
    """A Location as it is (an endpoint given here replaces its own); a string parsed (the Python API's edge)."""
    if isinstance(where, Location):
        return dataclasses.replace(where, endpoint=endpoint) if endpoint else where
    return parse_location(where, endpoint)


class Driver:
    """One kind of store. Subclasses set the facts and override what differs."""

    name = "store"
    schemes: tuple[str, ...] = ()
    package: str | None = None  # the fsspec implementation, installed by the extra
    extra: str | None = None  # pip install 'tritonbuild[extra]'
    local = False  # a directory on this host: atomic renames, temporaries, O_EXCL
    lease: type[leases.LeaseStore] = leases.LeaseStore
    credentials = ""  # where its credentials come from (for the fix of a refused request)
    endpoint_hint = ""  # what points it at an endpoint (for the fix of an unreachable one)
    no_bucket_codes: frozenset[str] = (
        frozenset()
    )  # the service's error codes for a missing bucket/container
    denied_codes: frozenset[str] = frozenset()  # ... and for refused credentials

    def example(self) -> str:
        return f"{self.schemes[0]}://bucket/prefix"

    def endpoint(self, given: str | None) -> str | None:
        """The service endpoint this store is reached at, where it has a choice (S3-compatible ones)."""
        return None

    def check(self, location: Location) -> None:
        if not location.path.strip("/"):
            raise PublishError(
                "the target names no bucket", where=location.url, hint=f"use {self.example()}"
            )

    def options(self, location: Location) -> dict:
        """fsspec storage_options: this store's timeouts and retries, cut to the network deadline."""
        return {}

    def settle(self, fs):
        """The filesystem as tritonbuild uses it (one retry layer, the deadline on every small call)."""
        return BoundedFS(fs)

    def open(self, location: Location):
        """(filesystem, root path) for a location; the driver may ask the network for credentials while it is
        made (gcsfs), so that is under the deadline too. ImportError when its package is missing."""
        from fsspec.core import url_to_fs

        options = self.options(location)
        fs, root = within_deadline(
            lambda: url_to_fs(location.raw, **options), f"open {location.scheme}://"
        )
        return self.settle(fs), root

    def triton_url(self, location: Location, root: str) -> str:
        """The --model-repository string tritonserver understands for this place."""
        return f"{location.scheme}://{root}"

    def failure_types(self) -> tuple[tuple, tuple]:
        """(network errors, missing-credentials errors) of its SDK, for classify; () where not installed."""
        return (), ()

    def classify(self, e: BaseException) -> str:
        """'no-bucket', 'denied', 'not-found', 'network' or 'other' (core/objstore.classify, with this store's
        codes and types)."""
        network, nocreds = self.failure_types()
        return classify(
            e,
            no_bucket=self.no_bucket_codes,
            denied=self.denied_codes,
            network=network,
            nocreds=nocreds,
        )

    # -- objects: what differs between a directory on this host and an object store ------------------------
    def write(self, fs, root: str, path: str, data: bytes) -> None:
        """One object, all or nothing: a single PUT."""
        fs.pipe_file(path, data)

    def upload(self, fs, root: str, local: Path, path: str, advance) -> None:
        """A local file to path; advance(n) as bytes go (the driver switches to multipart by itself: s3fs
        above its 50 MiB chunk size)."""
        from fsspec.callbacks import Callback

        class _Bytes(Callback):
            def relative_update(self, inc=1):
                advance(inc)

        fs.put_file(str(local), path, callback=_Bytes())

    def remove(self, fs, path: str) -> None:
        if fs.exists(path):
            fs.rm(path, recursive=True)

    def reach(self, fs, root: str, where: str) -> None:
        """Fails when the bucket is missing, credentials are refused or the endpoint does not answer."""
        fs.ls(root.split("/", 1)[0], refresh=True)

    def abort_uploads(self, fs, root: str) -> list[tuple[str, str]]:
        """Uploads a killed writer left unfinished under root, aborted: (path under root, when it started)."""
        return []


class LocalDriver(Driver):
    name = "local directory"
    schemes = ("file",)
    local = True
    lease = leases.LocalLease

    def example(self) -> str:
        return "file:///abs/path"

    def check(self, location: Location) -> None:
        if not location.path.startswith("/"):
            raise PublishError(
                f"file target {location.url!r} needs an absolute path",
                where=location.url,
                hint="write file:///absolute/path (three slashes)",
            )

    def settle(self, fs):
        return fs

    def triton_url(self, location: Location, root: str) -> str:
        return root

    @staticmethod
    def _temporaries(root: str) -> Path:
        """Where temporaries live while written: the root, as plain files. Triton reads only the directories
        of a repository's root (each one a model), so a writer killed mid-write leaves nothing inside a model
        or version directory (the publisher removes what is left: objects.clean_temporaries)."""
        Path(root).mkdir(parents=True, exist_ok=True)
        return Path(root)

    def write(self, fs, root: str, path: str, data: bytes) -> None:
        write_atomic(Path(path), data, self._temporaries(root))  # os.replace: all or nothing

    def upload(self, fs, root: str, local: Path, path: str, advance) -> None:
        with open(local, "rb") as src, atomic_writer(Path(path), self._temporaries(root)) as dst:
            # NOTE: copy_file_range copies inside the kernel (and reflinks where the filesystem can);
            # 1 GiB steps: smaller ones measured 2x slower here; progress moves per GiB.
            while n := os.copy_file_range(src.fileno(), dst.fileno(), 1 << 30):
                advance(n)

    def remove(self, fs, path: str) -> None:
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.unlink(path)

    def reach(self, fs, root: str, where: str) -> None:
        if Path(root).exists() and not Path(root).is_dir():
            raise PublishError(
                f"{root} is a file, not a directory: a target is a directory of models",
                where=where,
                hint="pick another path, or move that file away",
            )
        if not Path(root).parent.is_dir():
            raise PublishError(
                f"{Path(root).parent} does not exist", where=where, hint="create it first"
            )


class S3Driver(Driver):
    name = "S3"
    schemes = ("s3",)
    package, extra = "s3fs", "s3"
    lease = leases.S3Lease
    credentials = "AWS_PROFILE / AWS_ACCESS_KEY_ID / instance role"
    endpoint_hint = "--endpoint-url / AWS_ENDPOINT_URL"
    no_bucket_codes = frozenset({"NoSuchBucket"})
    denied_codes = frozenset(
        {
            "AccessDenied",
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "ExpiredToken",
            "InvalidToken",
            "AllAccessDisabled",
            "AccountProblem",
            "InvalidClientTokenId",
            "UnrecognizedClientException",
        }
    )

    def failure_types(self) -> tuple[tuple, tuple]:
        try:
            from botocore.exceptions import ConnectionError as BotoConnectionError
            from botocore.exceptions import HTTPClientError, NoCredentialsError
        except ImportError:
            return (), ()
        return (BotoConnectionError, HTTPClientError), (NoCredentialsError,)

    def endpoint(self, given: str | None) -> str | None:
        return given or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")

    def options(self, location: Location) -> dict:
        """ATTEMPTS attempts (botocore's standard mode) whose timeouts fit the deadline."""
        connect, read = attempt_timeouts()
        return {
            "client_kwargs": {"endpoint_url": location.endpoint} if location.endpoint else {},
            "config_kwargs": {
                "connect_timeout": connect,
                "read_timeout": read,
                "retries": {"mode": "standard", "total_max_attempts": ATTEMPTS},
            },
            "skip_instance_cache": True,
        }

    def settle(self, fs):
        fs.retries = (
            1  # s3fs retries timeouts and some errors itself (5 times) on top of botocore: off
        )
        return BoundedFS(fs)

    def triton_url(self, location: Location, root: str) -> str:
        if not location.endpoint:
            return f"s3://{root}"
        ep = urlparse(location.endpoint)
        port = ep.port or (443 if ep.scheme == "https" else 80)
        return f"s3://{ep.scheme}://{ep.hostname}:{port}/{root}"

    def abort_uploads(self, fs, root: str) -> list[tuple[str, str]]:
        """Multipart uploads are invisible to listings and billed until aborted."""
        bucket, prefix, _ = fs.split_path(root)
        prefix = f"{prefix.rstrip('/')}/" if prefix else ""
        aborted = []
        for up in fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix).get(
            "Uploads", []
        ):
            fs.call_s3(
                "abort_multipart_upload", Bucket=bucket, Key=up["Key"], UploadId=up["UploadId"]
            )
            aborted.append((up["Key"][len(prefix) :], str(up.get("Initiated", "?"))))
        return aborted


class GCSDriver(Driver):
    name = "Google Cloud Storage"
    schemes = ("gs", "gcs")
    package, extra = "gcsfs", "gcs"
    lease = leases.GCSLease
    credentials = "GOOGLE_APPLICATION_CREDENTIALS"
    endpoint_hint = "STORAGE_EMULATOR_HOST"

    def failure_types(self) -> tuple[tuple, tuple]:
        return _aiohttp_network(), ()

    def options(self, location: Location) -> dict:
        """Each HTTP request bounded by aiohttp's connect and between-reads timeouts (gcsfs's requests_timeout;
        unset, aiohttp waits forever on an endpoint that never answers; a total timeout would cut a large
        download short). gcsfs retries a fixed 6 times with 1+2+4+8+16 s of backoff: past the deadline, so
        BoundedFS's wall clock is what bounds a gs:// request in the end."""
        from aiohttp import ClientTimeout

        # NOTE: gcsfs >= 2025.x probes every bucket for zonal/HNS support over gRPC (storage control API) with a
        # 60 s timeout of its own, outside requests_timeout; publishing needs none of those experimental paths.
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        connect, read = attempt_timeouts(6, 0.0)
        return {
            "requests_timeout": ClientTimeout(total=None, sock_connect=connect, sock_read=read),
            "skip_instance_cache": True,
        }

    def triton_url(self, location: Location, root: str) -> str:
        return f"gs://{root}"  # tritonserver knows gs:// only


class AzureDriver(Driver):
    name = "Azure Blob Storage"
    schemes = ("az", "abfs")
    package, extra = "adlfs", "azure"
    lease = leases.AzureLease
    credentials = (
        "AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY or "
        "AZURE_STORAGE_SAS_TOKEN"
    )
    endpoint_hint = "AZURE_STORAGE_CONNECTION_STRING"
    no_bucket_codes = frozenset({"ContainerNotFound"})
    denied_codes = frozenset({"AuthenticationFailed", "AuthorizationFailure"})

    def failure_types(self) -> tuple[tuple, tuple]:
        return _aiohttp_network(), ()  # adlfs's transport

    def example(self) -> str:
        return "az://container/prefix"

    def options(self, location: Location) -> dict:
        """adlfs's connection_timeout and read_timeout (seconds, handed to the Azure SDK's transport on blob
        transfers; the SDK's default is 300 s each). The SDK's own retries (3, from 15 s of backoff up) do not
        fit the deadline: BoundedFS's wall clock bounds every other call."""
        connect, read = attempt_timeouts()
        return {
            "connection_timeout": max(1, int(connect)),
            "read_timeout": max(1, int(read)),
            "skip_instance_cache": True,
        }

    def triton_url(self, location: Location, root: str) -> str:
        account = os.environ.get("AZURE_STORAGE_ACCOUNT") or os.environ.get(
            "AZURE_STORAGE_ACCOUNT_NAME", "ACCOUNT"
        )
        return f"as://{account}/{root}"


def _aiohttp_network() -> tuple:
    try:
        from aiohttp import ClientConnectionError
    except ImportError:
        return ()
    return (ClientConnectionError,)


DRIVERS: dict[str, Driver] = {}


def register(driver: Driver) -> None:
    for scheme in driver.schemes:
        DRIVERS[scheme] = driver


for _driver in (LocalDriver(), S3Driver(), GCSDriver(), AzureDriver()):
    register(_driver)


def _examples() -> str:
    return ", ".join(dict.fromkeys(d.example() for d in DRIVERS.values()))


def open_url(url: str):
    """(filesystem, path) for a source URL: through its store's driver where one is registered (its options
    cut to the network deadline, one retry layer), else fsspec's own (https://, hf://...)."""
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
