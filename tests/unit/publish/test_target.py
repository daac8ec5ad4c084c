from __future__ import annotations

import pytest

from tritonbuild.errors import PublishError
from tritonbuild.publish.pinning import live_version, pinned_config
from tritonbuild.publish.target import open_target, redact


def test_s3_with_endpoint_gives_tritons_url_form():
    t = open_target("s3://bucket/models/prod/", endpoint_url="http://127.0.0.1:9000")
    assert t.root == "bucket/models/prod"
    assert t.triton_url() == "s3://http://127.0.0.1:9000/bucket/models/prod"


def test_s3_endpoint_without_port_gets_the_scheme_default():
    t = open_target("s3://b/p", endpoint_url="https://minio.internal")
    assert t.triton_url() == "s3://https://minio.internal:443/b/p"


def test_file_target_is_local(tmp_path):
    t = open_target(f"file://{tmp_path}/repo")
    assert t.is_local and t.triton_url() == f"{tmp_path}/repo"


@pytest.mark.parametrize(
    "url, words",
    [
        ("bucket/prefix", "is not a URL"),
        ("ftp://host/x", "unsupported target scheme"),
        ("file://relative/path", "needs an absolute path"),
        ("s3://", "names no bucket"),
    ],
)
def test_bad_target_urls(url, words):
    with pytest.raises(PublishError) as info:
        open_target(url)
    assert words in info.value.message and info.value.exit_code == 7


def test_redact_hides_env_secrets_and_query_credentials(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "verysecretvalue123")
    text = redact("failed with verysecretvalue123 at https://x/?X-Amz-Signature=abc&sig=1")
    assert "verysecretvalue123" not in text and "abc" not in text


def test_pinned_config_switches_versions():
    base = b'name: "m"\nbackend: "python"\nversion_policy { latest { num_versions: 1 } }\nmax_batch_size: 0\n'
    assert live_version(pinned_config(base, [3])) == 3
    assert live_version(pinned_config(base, [])) is None
    assert b"specific {\n  }" in pinned_config(base, [])


def test_a_gcs_target_is_spelled_gs_for_tritonserver(monkeypatch):
    """gcsfs takes gcs:// and gs://; tritonserver knows only gs:// (triton-inference-server/core 9987231
    src/filesystem/api.cc, FileSystemManager::GetFileSystem) and reads anything else as a local path."""
    import fsspec.core

    monkeypatch.setattr(
        fsspec.core, "url_to_fs", lambda url, **options: (object(), url.split("://", 1)[1])
    )
    assert open_target("gcs://bucket/models").triton_url() == "gs://bucket/models"


@pytest.mark.parametrize(
    "url, extra", [("gs://b/p", "gcs"), ("az://c/p", "azure"), ("s3://b/p", "s3")]
)
def test_a_missing_driver_names_the_extra_that_installs_it(monkeypatch, url, extra):
    import fsspec.core

    def missing(url, **options):
        raise ImportError("no driver")

    monkeypatch.setattr(fsspec.core, "url_to_fs", missing)
    with pytest.raises(PublishError) as info:
        open_target(url)
    assert f"pip install 'tritonbuild[{extra}]'" in info.value.hint and info.value.exit_code == 7
