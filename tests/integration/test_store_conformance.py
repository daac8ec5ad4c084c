"""One conformance suite every object-store driver must pass (the fsspec abstract-test pattern): the same
behaviours of the publish layer's store calls (publish/objects.py) and of the lock's conditional writes
(core/leases.py), run against the file driver and, where their servers run here, S3 (moto_server), GCS
(fake-gcs-server) and Azure Blob (Azurite). A new driver adds one entry to `target`'s params; what is peculiar
to one driver (its timeout options, its retry budget) stays in that driver's own tests
(tests/unit/core/test_objstore_drivers.py, test_publish_s3.py, test_publish_gcs_azure.py)."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from tritonbuild.core.leases import Moved
from tritonbuild.publish import objects
from tritonbuild.publish.target import open_target

pytestmark = [pytest.mark.s3]
SCHEMES = (
    "file",
    "s3",
    "gs",
    "az",
)  # one per driver: tests/unit/core/test_stores.py checks none is left out


@pytest.fixture(params=SCHEMES)
def target(request, tmp_path, monkeypatch):
    """A Target on an empty place of each driver's store."""
    scheme = request.param
    if scheme == "file":
        return open_target(f"file://{tmp_path / 'store'}")
    if scheme == "s3":
        return open_target(f"s3://{request.getfixturevalue('bucket')}/models")
    name = f"tb-{uuid.uuid4().hex[:12]}"
    if scheme == "gs":
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", request.getfixturevalue("gcs_server"))
        monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    else:
        monkeypatch.setenv(
            "AZURE_STORAGE_CONNECTION_STRING", request.getfixturevalue("azure_server")
        )
    open_target(f"{scheme}://{name}").fs.mkdir(name)
    return open_target(f"{scheme}://{name}/models")


class TestStoreConformance:
    def test_a_written_object_reads_back_byte_for_byte(self, target):
        data = bytes(range(256)) * 64
        objects.write_bytes(target, target.path("m", "1", "model.bin"), data)
        assert objects.read_text(target, target.path("m", "1", "model.bin")) == data
        assert (
            objects.remote_sha256(target, target.path("m", "1", "model.bin"))
            == hashlib.sha256(data).hexdigest()
        )

    def test_an_absent_object_reads_as_none(self, target):
        assert objects.read_text(target, target.path("nothing", "config.pbtxt")) is None

    def test_a_rewrite_replaces_the_whole_object(self, target):
        path = target.path("m", "config.pbtxt")
        objects.write_bytes(target, path, b"x" * 1000)
        objects.write_bytes(target, path, b"short")
        assert objects.read_text(target, path) == b"short"

    def test_sizes_under_a_prefix_and_subdirectories(self, target):
        for rel, data in {
            "m/1/a": b"1",
            "m/1/sub/b": b"22",
            "m/2/c": b"333",
            "other/d": b"4444",
        }.items():
            objects.write_bytes(target, target.path(*rel.split("/")), data)
        assert objects.remote_sizes(target, target.path("m")) == {"1/a": 1, "1/sub/b": 2, "2/c": 3}
        assert objects.remote_sizes(target, target.path("absent")) == {}
        assert sorted(objects.subdirs(target, target.path("m"))) == ["1", "2"]
        assert objects.subdirs(target, target.path("absent")) == []

    def test_a_removed_tree_is_gone_and_its_siblings_stay(self, target):
        objects.write_bytes(target, target.path("m", "1", "a"), b"a")
        objects.write_bytes(target, target.path("m", "2", "b"), b"b")
        objects.remove_tree(target, target.path("m", "1"))
        assert objects.read_text(target, target.path("m", "1", "a")) is None
        assert objects.read_text(target, target.path("m", "2", "b")) == b"b"

    def test_the_lock_is_created_once(self, target):
        lease = target.driver.lease(target, target.path("tritonbuild.lock"))
        assert lease.read() == (None, None)
        version = lease.create(b"first")
        with pytest.raises(FileExistsError):
            lease.create(b"second")
        body, seen = lease.read()
        assert body == b"first" and seen is not None and (version is None or seen == version)

    def test_the_lock_is_replaced_and_deleted_only_at_the_version_seen(self, target):
        lease = target.driver.lease(target, target.path("tritonbuild.lock"))
        lease.create(b"first")
        _, first = lease.read()
        second = lease.replace(b"second", first)
        assert lease.read()[0] == b"second"
        with pytest.raises(Moved):
            lease.replace(b"third", first)
        assert lease.read()[0] == b"second"
        if (
            target.location.scheme != "gs"
        ):  # fake-gcs-server ignores ifGenerationMatch on delete (measured,
            with pytest.raises(
                Moved
            ):  # see test_publish_gcs_azure.py): the request is sent, not proven
                lease.delete(first)
        lease.delete(second or lease.read()[1])
        assert lease.read() == (None, None)


def test_the_suite_fails_a_driver_that_breaks_the_contract(tmp_path, monkeypatch):
    """Broken on purpose: a file driver that drops an object's last byte, and one whose lock create overwrites."""
    suite = TestStoreConformance()
    target = open_target(f"file://{tmp_path / 'store'}")
    driver_type, lease_type = type(target.driver), target.driver.lease
    write = driver_type.write
    monkeypatch.setattr(
        driver_type,
        "write",
        lambda self, fs, root, path, data: write(self, fs, root, path, data[:-1]),
    )
    with pytest.raises(AssertionError):
        suite.test_a_written_object_reads_back_byte_for_byte(target)
    monkeypatch.undo()

    def overwriting_create(self, body: bytes):
        (tmp_path / "store" / "tritonbuild.lock").write_bytes(body)
        return None

    monkeypatch.setattr(lease_type, "create", overwriting_create)
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        suite.test_the_lock_is_created_once(target)
