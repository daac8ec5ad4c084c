"""The lease primitives send each store's precondition on every write of the lock. The stores' own behaviour is
tested against real servers (tests/integration/test_publish_gcs_azure.py, test_publish_s3.py); this file pins
what is sent where an emulator ignores it (fake-gcs-server ignores ifGenerationMatch on objects.delete)."""

from __future__ import annotations

import pytest

from tritonbuild.core.leases import GCSLease, LocalLease, Moved


class _Target:
    def __init__(self, fs, root="bkt/prefix", protocol="gs"):
        self.fs, self.root, self.protocol = fs, root, protocol
        self.is_local = protocol == "file"


class _RecordingGCS:
    """What GCSLease calls on a gcsfs filesystem, recorded; the answers a real bucket gives to each."""

    _location = "http://gcs.invalid"

    def __init__(self, generation="7"):
        self.calls, self.generation = [], generation

    @staticmethod
    def split_path(path):
        bucket, key = path.split("/", 1)
        return bucket, key, None

    def info(self, path, refresh=False):
        return {"generation": self.generation}

    def call(self, method, path, *args, **kw):
        self.calls.append(
            (method, kw.get("ifGenerationMatch"), kw.get("generation"), kw.get("uploadType"))
        )
        if kw.get("ifGenerationMatch") not in (None, self.generation) and not (
            kw.get("ifGenerationMatch") == "0" and self.generation is None
        ):
            raise FileExistsError(path)  # gcsfs's translation of 412 Precondition Failed
        if method == "POST":
            self.generation = str(int(self.generation or 0) + 1)
            return {"generation": self.generation}
        return {}, b'{"token": "t"}'


def test_every_gcs_write_of_the_lock_names_the_generation_it_expects():
    fs = _RecordingGCS(generation=None)
    lease = GCSLease(_Target(fs), "bkt/prefix/tritonbuild.lock")
    assert lease.create(b"{}") == "1"
    with pytest.raises(FileExistsError):
        lease.create(b"{}")  # present: ifGenerationMatch=0 fails
    assert lease.replace(b"{}", "1") == "2"
    with pytest.raises(Moved):
        lease.replace(b"{}", "1")  # renewed since: the stale generation fails
    with pytest.raises(Moved):
        lease.delete("1")
    lease.delete("2")
    raw, generation = lease.read()
    assert (raw, generation) == (b'{"token": "t"}', "2")
    assert fs.calls == [
        ("POST", "0", None, "multipart"),
        ("POST", "0", None, "multipart"),
        ("POST", "1", None, "multipart"),
        ("POST", "1", None, "multipart"),
        ("DELETE", "1", None, None),
        ("DELETE", "2", None, None),
        ("GET", None, "2", None),
    ]  # the read fetches the very generation it stat'ed


def test_local_lease_replace_and_delete_refuse_a_moved_lock(tmp_path):
    lease = LocalLease(_Target(None, str(tmp_path), "file"), str(tmp_path / "tritonbuild.lock"))
    mine = lease.create(b'{"token": "a"}')
    with pytest.raises(FileExistsError):
        lease.create(b'{"token": "b"}')
    (tmp_path / "tritonbuild.lock").write_bytes(b'{"token": "b"}')  # someone else's now
    with pytest.raises(Moved):
        lease.replace(b'{"token": "a"}', mine)
    with pytest.raises(Moved):
        lease.delete(mine)
    assert (tmp_path / "tritonbuild.lock").read_bytes() == b'{"token": "b"}'  # put back, untouched
    assert [p.name for p in tmp_path.iterdir()] == ["tritonbuild.lock"]
    lease.delete(lease.read()[1])
    assert lease.read() == (None, None)
