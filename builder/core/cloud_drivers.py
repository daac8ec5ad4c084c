"""The object stores' drivers: S3 (and S3-compatible services), Google Cloud Storage and Azure Blob
Storage. Each names its fsspec package and extra, its lease (core/leases.py), its SDK's error codes
and exception types, the timeouts that fit the network deadline, and how tritonserver spells its
URLs."""

from __future__ import annotations

import os
from urllib.parse import urlparse

from tritonbuild.core import leases
from tritonbuild.core.drivers import Driver
from tritonbuild.core.location import Location
from tritonbuild.core.objstore import ATTEMPTS, BoundedFS, attempt_timeouts


class S3Driver(Driver):
    name = "S3"
    schemes = ("s3",)
    package, extra = "s3fs", "s3"
    lease = leases.S3Lease
    credentials = "AWS_PROFILE / AWS_ACCESS_KEY_ID / instance role"
    endpoint_hint = "--endpoint-url / AWS_ENDPOINT_URL"
    endpoint_env = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
    triton_scheme = "s3"
    triton_env = (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
    )
    secret_env = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
    secret_keys = (
        "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION (and AWS_SESSION_TOKEN)"
    )
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
    triton_scheme = "gs"  # tritonserver knows gs:// only
    triton_env = ("GOOGLE_APPLICATION_CREDENTIALS",)
    secret_env = ("GOOGLE_APPLICATION_CREDENTIALS_JSON",)
    secret_keys = "key.json (a service account key; GOOGLE_APPLICATION_CREDENTIALS points at it)"
    # the key file mounted from the Secret; the variable names it
    secret_files = (("GOOGLE_APPLICATION_CREDENTIALS", "key.json"),)
    secret_folder = "/var/run/secrets/tritonbuild-gcs"

    def failure_types(self) -> tuple[tuple, tuple]:
        return _aiohttp_network(), ()

    def options(self, location: Location) -> dict:
        """Each HTTP request bounded by aiohttp's connect and between-reads timeouts (gcsfs's
        requests_timeout; unset, aiohttp waits forever on an endpoint that never answers; a total
        timeout would cut a large download short). gcsfs retries a fixed 6 times with 1+2+4+8+16 s
        of backoff: past the deadline, so BoundedFS's wall clock is what bounds a gs:// request in
        the end."""
        from aiohttp import ClientTimeout

        # NOTE: gcsfs >= 2025.x probes every bucket for zonal/HNS support over gRPC (storage control
        # API) with a 60 s timeout of its own, outside requests_timeout; publishing needs none of
        # those experimental paths.
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        connect, read = attempt_timeouts(6, 0.0)
        return {
            "requests_timeout": ClientTimeout(total=None, sock_connect=connect, sock_read=read),
            "skip_instance_cache": True,
        }


class AzureDriver(Driver):
    name = "Azure Blob Storage"
    schemes = ("az", "abfs")
    package, extra = "adlfs", "azure"
    lease = leases.AzureLease
    credentials = (
        "AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT_NAME with "
        "AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN"
    )
    endpoint_hint = "AZURE_STORAGE_CONNECTION_STRING"
    triton_scheme = "as"  # as://ACCOUNT/container/path
    triton_env = ("AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY")
    secret_env = ("AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CONNECTION_STRING")
    secret_keys = "AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY"
    no_bucket_codes = frozenset({"ContainerNotFound"})
    denied_codes = frozenset({"AuthenticationFailed", "AuthorizationFailure"})

    def failure_types(self) -> tuple[tuple, tuple]:
        return _aiohttp_network(), ()  # adlfs's transport

    def example(self) -> str:
        return "az://container/prefix"

    def options(self, location: Location) -> dict:
        """adlfs's connection_timeout and read_timeout (seconds, handed to the Azure SDK's transport
        on blob transfers; the SDK's default is 300 s each). The SDK's own retries (3, from 15 s of
        backoff up) do not fit the deadline: BoundedFS's wall clock bounds every other call."""
        connect, read = attempt_timeouts()
        return {
            "connection_timeout": max(1, int(connect)),
            "read_timeout": max(1, int(read)),
            "skip_instance_cache": True,
        }

    def triton_url(self, location: Location, root: str) -> str:
        return f"{self.triton_scheme}://{self._account() or 'ACCOUNT'}/{root}"

    def serving_problem(self, location: Location) -> tuple[str, str] | None:
        if self._account():
            return None
        return (
            "tritonserver names the Azure storage account in its repository URL "
            "(as://ACCOUNT/container/path)",
            "set AZURE_STORAGE_ACCOUNT to the account",
        )

    @staticmethod
    def _account() -> str | None:
        return os.environ.get("AZURE_STORAGE_ACCOUNT") or os.environ.get(
            "AZURE_STORAGE_ACCOUNT_NAME"
        )


def _aiohttp_network() -> tuple:
    try:
        from aiohttp import ClientConnectionError
    except ImportError:
        return ()
    return (ClientConnectionError,)
