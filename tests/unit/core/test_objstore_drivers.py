"""gs:// and az:// targets and remote caches get bounded timeouts, like s3://: the options must reach the
driver's filesystem object, under the names gcsfs and adlfs read (gcsfs: requests_timeout, handed to aiohttp on
every request; adlfs: connection_timeout/read_timeout, handed to the Azure SDK on every blob transfer), cut from
the network deadline; every other call runs against the deadline's wall clock (BoundedFS)."""

from __future__ import annotations

import json

import pytest

from tritonbuild.core import cloud_drivers, drivers, objstore
from tritonbuild.core.location import Location


@pytest.fixture(autouse=True)
def _gcs_credentials(monkeypatch, tmp_path):
    """Offline credentials, so gcsfs does not probe the GCE metadata server (seconds of retried timeouts)."""
    creds = tmp_path / "adc.json"
    creds.write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "x",
                "client_secret": "y",
                "refresh_token": "z",
            }
        )
    )
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))


def test_gcs_target_requests_are_bounded(monkeypatch):
    pytest.importorskip("gcsfs")
    monkeypatch.setenv(objstore.DEADLINE_ENV, "12")
    from tritonbuild.publish.target import open_target

    target = open_target("gs://bucket/models")
    assert isinstance(target.fs, objstore.BoundedFS)
    timeout = (
        target.fs.requests_timeout
    )  # what GCSFileSystem._request passes to aiohttp as timeout=
    assert timeout is not None, "unbounded: aiohttp then waits forever on a silent endpoint"
    assert timeout.sock_connect + timeout.sock_read == pytest.approx(12 / 6)  # gcsfs's 6 attempts
    assert timeout.total is None  # a large download is not cut short, silence is


def test_azure_target_transfers_are_bounded(monkeypatch):
    pytest.importorskip("adlfs")
    monkeypatch.setenv(objstore.DEADLINE_ENV, "30")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "tritonbuildtest")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", "a2V5")
    from tritonbuild.publish.target import open_target

    target = open_target("az://container/models")
    # what AzureBlobFileSystem passes to upload_blob/download_blob (the Azure SDK's transport timeouts)
    assert target.fs._timeout_kwargs == {"connection_timeout": 3, "read_timeout": 6}


def test_s3_attempts_and_backoff_fit_the_deadline(monkeypatch):
    monkeypatch.setenv(objstore.DEADLINE_ENV, "30")
    config = cloud_drivers.S3Driver().options(Location("s3", "b/p"))["config_kwargs"]
    per_attempt = config["connect_timeout"] + config["read_timeout"]
    assert config["retries"] == {"mode": "standard", "total_max_attempts": objstore.ATTEMPTS}
    assert objstore.ATTEMPTS * per_attempt + objstore.BACKOFF_S <= 30


def test_a_call_past_the_deadline_names_it(monkeypatch):
    import threading

    monkeypatch.setenv(objstore.DEADLINE_ENV, "0.3")
    never = threading.Event()

    class Silent:
        def ls(self, path):
            never.wait(5)

    with pytest.raises(
        objstore.DeadlineExceeded,
        match=r"ls\(bucket\) within the 0.3 s network deadline .*"
        "TRITONBUILD_NET_DEADLINE_S",
    ):
        objstore.BoundedFS(Silent()).ls("bucket")
    never.set()
    assert objstore.classify(objstore.DeadlineExceeded("x")) == "network"


def test_remote_cache_gets_the_same_bounds(monkeypatch):
    pytest.importorskip("gcsfs")
    from tritonbuild.core.remote import RemoteCache

    fs = RemoteCache("gs://bucket/cache", warn=lambda *_: None)._filesystem()
    assert fs.requests_timeout is not None and fs.requests_timeout.sock_read > 0


def test_options_per_driver():
    assert drivers.LocalDriver().options(Location("file", "/x")) == {}
    s3 = cloud_drivers.S3Driver().options(Location("s3", "b/p", "http://x"))
    assert s3["client_kwargs"] == {"endpoint_url": "http://x"}
    assert set(cloud_drivers.AzureDriver().options(Location("az", "c/p"))) >= {
        "connection_timeout",
        "read_timeout",
    }
