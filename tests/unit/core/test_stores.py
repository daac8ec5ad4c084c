"""core/stores.py: every scheme reaches its one driver, a URL is parsed once into a Location, and what a driver
declares (lease primitives, Triton's spelling, the extra that installs it) is what its store needs."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

from tritonbuild.core import cloud_drivers, drivers, leases, stores
from tritonbuild.core.location import Location
from tritonbuild.core.stores import as_location, driver_for, is_url, parse_location, split_url
from tritonbuild.errors import PublishError

ROOT = Path(__file__).resolve().parents[3]

# tritonserver picks a filesystem by these prefixes and treats anything else as a local path:
# triton-inference-server/core 998723190242ee14a51f774bc6383c4e4528996a src/filesystem/api.cc,
# FileSystemManager::GetFileSystem(const std::string& path, ...)
TRITON_PREFIXES = ("gs://", "s3://", "as://")


@pytest.mark.parametrize(
    "scheme, driver, lease",
    [
        ("file", drivers.LocalDriver, leases.LocalLease),
        ("s3", cloud_drivers.S3Driver, leases.S3Lease),
        ("gs", cloud_drivers.GCSDriver, leases.GCSLease),
        ("gcs", cloud_drivers.GCSDriver, leases.GCSLease),
        ("az", cloud_drivers.AzureDriver, leases.AzureLease),
        ("abfs", cloud_drivers.AzureDriver, leases.AzureLease),
    ],
)
def test_each_scheme_reaches_its_driver_and_its_lease_primitives(scheme, driver, lease):
    found = driver_for(scheme)
    assert type(found) is driver and found.lease is lease
    assert scheme in found.schemes


def test_every_store_declares_the_four_conditional_operations():
    for driver in set(stores.DRIVERS.values()):
        for op in ("create", "read", "replace", "delete"):
            assert getattr(driver.lease, op) is not getattr(leases.LeaseStore, op), (
                driver.name,
                op,
            )


@pytest.mark.parametrize("url", ["ftp://host/x", "http://host/models", "hdfs://nn/models"])
def test_an_unknown_scheme_is_a_clear_publish_error(url):
    with pytest.raises(PublishError) as info:
        parse_location(url)
    message = info.value.message
    assert "unsupported target scheme" in message and "s3://" in message and "file://" in message
    assert (
        info.value.exit_code == 7
        and info.value.where == url
        and "s3://bucket/prefix" in info.value.hint
    )


def test_a_location_is_parsed_once_and_keeps_its_parts():
    where = parse_location("s3://bucket/models/prod/", "http://127.0.0.1:9000")
    assert where == Location("s3", "bucket/models/prod", "http://127.0.0.1:9000")
    assert where.url == "s3://bucket/models/prod" and str(where) == where.url
    assert as_location(where) is where  # typed from the edge down: never parsed again
    assert as_location("s3://bucket/models/prod", "http://127.0.0.1:9000") == where
    with pytest.raises(AttributeError):
        where.path = "other"  # frozen


def test_only_s3_takes_an_endpoint(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://env:9000")
    assert parse_location("s3://b/p").endpoint == "http://env:9000"
    assert parse_location("s3://b/p", "http://flag:1").endpoint == "http://flag:1"
    assert parse_location("gs://b/p", "http://flag:1").endpoint is None
    assert parse_location("file:///tmp/x", "http://flag:1").endpoint is None


@pytest.mark.parametrize(
    "where, expected",
    [
        (Location("s3", "b/p"), "s3://b/p"),
        (Location("s3", "b/p", "http://127.0.0.1:9000"), "s3://http://127.0.0.1:9000/b/p"),
        (Location("gs", "b/p"), "gs://b/p"),
        (Location("gcs", "b/p"), "gs://b/p"),
        (Location("az", "c/p"), "as://acct/c/p"),
        (Location("file", "/srv/models"), "/srv/models"),
    ],
)
def test_tritons_spelling_of_each_place(monkeypatch, where, expected):
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "acct")
    driver = driver_for(where.scheme)
    url = driver.triton_url(where, where.path)
    assert url == expected
    assert url.startswith(TRITON_PREFIXES) or (driver.local and url.startswith("/"))


def test_the_install_hint_names_an_extra_the_package_declares():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for driver in set(stores.DRIVERS.values()):
        if driver.package:
            assert driver.extra in extras, driver.name
            assert any(dep.startswith(driver.package) for dep in extras[driver.extra]), driver.name


def test_a_missing_driver_package_names_its_extra(monkeypatch):
    from tritonbuild.publish.target import open_target

    def missing(location):
        raise ImportError("No module named 'gcsfs'")

    monkeypatch.setattr(cloud_drivers.GCSDriver, "open", lambda self, location: missing(location))
    with pytest.raises(PublishError) as info:
        open_target("gs://bucket/models")
    assert (
        "(gcsfs) is not installed" in info.value.message and "tritonbuild[gcs]" in info.value.hint
    )


def test_a_registered_driver_serves_its_scheme(monkeypatch):
    monkeypatch.setattr(stores, "DRIVERS", dict(stores.DRIVERS))

    class Memory(drivers.Driver):
        name, schemes = "memory", ("memory",)

    stores.register(Memory())
    assert driver_for(parse_location("memory://bucket/x").scheme).name == "memory"


@pytest.mark.parametrize(
    "text, scheme",
    [
        ("s3://b/k", "s3"),
        ("file:///abs", "file"),
        ("/abs/path", None),
        ("relative/dir", None),
        ("host:8000", None),
    ],
)
def test_split_url(text, scheme):
    assert split_url(text)[0] == scheme and is_url(text) == (scheme is not None)


def test_with_scheme():
    assert stores.with_scheme("host:8000") == "http://host:8000"
    assert stores.with_scheme("https://host") == "https://host"


def test_the_remote_cache_opens_a_plain_path_through_the_local_driver(tmp_path):
    from tritonbuild.core.remote import RemoteCache

    warnings = []
    cache = RemoteCache(str(tmp_path / "shared"), warnings.append)
    assert cache.exists("ab" * 32) is False and warnings == []
    assert cache._root == str(tmp_path / "shared")


def test_the_local_driver_writes_whole_files_through_temporaries_in_the_root(tmp_path):
    local, root = driver_for("file"), tmp_path / "target"
    path = root / "model" / "1" / "model.onnx"
    path.parent.mkdir(parents=True)
    local.write(None, str(root), str(path), b"weights")
    src = tmp_path / "big.bin"
    src.write_bytes(b"x" * 4096)
    moved = []
    local.upload(None, str(root), src, str(root / "model" / "1" / "big.bin"), moved.append)
    assert path.read_bytes() == b"weights" and sum(moved) == 4096
    assert sorted(p.name for p in root.rglob("*") if p.is_file()) == [
        "big.bin",
        "model.onnx",
    ]  # no temporary
    local.remove(None, str(root / "model"))
    assert not (root / "model").exists()


def test_the_local_driver_refuses_a_root_it_cannot_be(tmp_path):
    (tmp_path / "file").write_text("")
    cases = [
        (tmp_path / "file", "is a file, not a directory"),
        (tmp_path / "no" / "repo", "does not exist"),
    ]
    for root, words in cases:
        with pytest.raises(PublishError) as info:
            driver_for("file").reach(None, str(root), f"file://{root}")
        assert words in info.value.message and info.value.exit_code == 7


def test_only_s3_has_unfinished_uploads_to_abort():
    class Untouchable:
        def __getattr__(self, name):
            raise AssertionError(f"{name} called")

    for scheme in ("gs", "az", "file"):
        assert driver_for(scheme).abort_uploads(Untouchable(), "bucket/prefix") == []


def test_each_driver_classifies_its_own_services_codes_and_sdk_errors():
    botocore = pytest.importorskip("botocore.exceptions")

    def s3(code):
        return botocore.ClientError({"Error": {"Code": code, "Message": "m"}}, "ListObjectsV2")

    class AzureError(Exception):
        error_code = (
            "ContainerNotFound"  # the Azure SDK's HttpResponseError carries the service's code here
        )

    assert driver_for("s3").classify(s3("NoSuchBucket")) == "no-bucket"
    assert driver_for("s3").classify(s3("SignatureDoesNotMatch")) == "denied"
    assert driver_for("s3").classify(botocore.NoCredentialsError()) == "denied"
    assert (
        driver_for("s3").classify(botocore.EndpointConnectionError(endpoint_url="http://x"))
        == "network"
    )
    assert driver_for("az").classify(AzureError()) == "no-bucket"
    assert (
        driver_for("s3").classify(AzureError()) == "other"
    )  # another store's code means nothing here
    for scheme in ("s3", "gs", "az", "file"):
        assert driver_for(scheme).classify(TimeoutError()) == "network"
        assert driver_for(scheme).classify(PermissionError()) == "denied"


def test_split_url_is_the_only_test_of_is_this_a_url():
    """Every other module asks split_url / is_url / with_scheme, so a new scheme rule has one place to go."""
    needle = '"://" ' + "in"
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in sorted((ROOT / "builder").rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if needle in line
    ]
    assert [where.split(":")[0] for where in found] == ["builder/core/stores.py"], found


def test_every_driver_runs_the_store_conformance_suite(monkeypatch):
    from tests.integration.test_store_conformance import SCHEMES

    def covered() -> bool:
        return {type(driver_for(scheme)) for scheme in SCHEMES} == {
            type(d) for d in stores.DRIVERS.values()
        }

    assert covered()

    class Unsuited(drivers.LocalDriver):
        schemes = ("unsuited",)

    monkeypatch.setitem(
        stores.DRIVERS, "unsuited", Unsuited()
    )  # broken on purpose: a driver the suite skips
    assert not covered()
