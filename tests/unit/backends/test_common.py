"""backends/common.py: a remote source is fetched through its store's driver (core/stores.py), so a store that
never answers fails the build within the network deadline instead of hanging it."""

from __future__ import annotations

import time

import pytest

from tritonbuild.backends.common import fetch_url
from tritonbuild.errors import BuildError


def test_an_s3_source_that_never_answers_fails_within_the_deadline(
    monkeypatch, tmp_path, silent_endpoint
):
    pytest.importorskip("s3fs")
    for name, value in {
        "AWS_ACCESS_KEY_ID": "AKIAFAKEFAKEFAKE",
        "AWS_SECRET_ACCESS_KEY": "fakeSecretValue123",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": silent_endpoint,
        "TRITONBUILD_NET_DEADLINE_S": "4",
    }.items():
        monkeypatch.setenv(name, value)
    t0 = time.monotonic()
    with pytest.raises(BuildError) as info:
        fetch_url("s3://bucket/model.onnx", tmp_path / "model.onnx", None)
    assert (
        time.monotonic() - t0 < 15
    )  # s3fs's own defaults: a 60 s read timeout, retried for minutes
    assert "cannot fetch s3://bucket/model.onnx" in info.value.message


def test_a_file_source_is_fetched_through_the_local_driver(tmp_path):
    src = tmp_path / "model.onnx"
    src.write_bytes(b"onnx")
    fetch_url(f"file://{src}", tmp_path / "copy.onnx", None)
    assert (tmp_path / "copy.onnx").read_bytes() == b"onnx"
