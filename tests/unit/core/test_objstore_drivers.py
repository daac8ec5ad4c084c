"""gs:// and az:// targets and remote caches get bounded timeouts, like s3:// (#14): the options must reach the
driver's filesystem object, under the names gcsfs and adlfs read (gcsfs: requests_timeout, handed to aiohttp on
every request; adlfs: connection_timeout/read_timeout, handed to the Azure SDK on every blob transfer)."""

from __future__ import annotations

import json

import pytest

from tritonbuild.core import objstore


@pytest.fixture(autouse=True)
def _gcs_credentials(monkeypatch, tmp_path):
    """Offline credentials, so gcsfs does not probe the GCE metadata server (seconds of retried timeouts)."""
    creds = tmp_path / "adc.json"
    creds.write_text(json.dumps({"type": "authorized_user", "client_id": "x", "client_secret": "y",
                                 "refresh_token": "z"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))


def test_gcs_target_requests_are_bounded(monkeypatch):
    pytest.importorskip("gcsfs")
    monkeypatch.setenv(objstore.READ_TIMEOUT_ENV, "7")
    from tritonbuild.publish.target import open_target

    target = open_target("gs://bucket/models")
    timeout = target.fs.requests_timeout  # what GCSFileSystem._request passes to aiohttp as timeout=
    assert timeout is not None, "unbounded: aiohttp then waits forever on a silent endpoint"
    assert timeout.sock_connect == objstore.CONNECT_TIMEOUT_S and timeout.sock_read == 7
    assert timeout.total is None  # a large download is not cut short, silence is


def test_azure_target_transfers_are_bounded(monkeypatch):
    pytest.importorskip("adlfs")
    monkeypatch.setenv(objstore.READ_TIMEOUT_ENV, "9")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "tritonbuildtest")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", "a2V5")
    from tritonbuild.publish.target import open_target

    target = open_target("az://container/models")
    # what AzureBlobFileSystem passes to upload_blob/download_blob (the Azure SDK's transport timeouts)
    assert target.fs._timeout_kwargs == {"connection_timeout": objstore.CONNECT_TIMEOUT_S, "read_timeout": 9}


def test_remote_cache_gets_the_same_bounds(monkeypatch):
    pytest.importorskip("gcsfs")
    from tritonbuild.core.remote import RemoteCache

    fs = RemoteCache("gs://bucket/cache", warn=lambda *_: None)._filesystem()
    assert fs.requests_timeout is not None and fs.requests_timeout.sock_connect == objstore.CONNECT_TIMEOUT_S


def test_options_per_protocol():
    assert objstore.storage_options("file") == {}
    assert objstore.storage_options("s3", "http://x")["client_kwargs"] == {"endpoint_url": "http://x"}
    assert set(objstore.azure_options()) >= {"connection_timeout", "read_timeout"}
