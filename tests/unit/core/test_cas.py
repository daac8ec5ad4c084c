"""The content-addressed store: blobs named by their sha256, records that survive only while intact."""

from __future__ import annotations

import hashlib
import os

import pytest

from tritonbuild.core.cas import FileEntry, Store


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "cache")


def test_a_blob_is_named_by_its_content_and_stored_once(store, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"same bytes")
    b.write_bytes(b"same bytes")
    digest, size = store.put_file(a)
    assert (digest, size) == (hashlib.sha256(b"same bytes").hexdigest(), 10)
    assert store.put_file(b) == (digest, size)
    assert store.blob_path(digest).read_bytes() == b"same bytes"
    assert (
        store.blob_path(digest).stat().st_mode & 0o777 == 0o444
    )  # read-only: a hardlinked copy cannot edit it
    assert list((store.root / "tmp").iterdir()) == []


def test_a_record_is_returned_while_its_blobs_are_intact(store, tmp_path):
    src = tmp_path / "model.py"
    src.write_bytes(b"print(1)\n")
    digest, size = store.put_file(src)
    record = {
        "kind": "python.package",
        "files": {"model.py": FileEntry(sha256=digest, size=size).model_dump()},
    }
    store.put_record("k" * 64, record)
    assert store.get_record("k" * 64) == record


@pytest.mark.parametrize("damage", ["delete", "truncate", "bitflip"])
def test_a_damaged_blob_evicts_its_record(store, tmp_path, damage):
    src = tmp_path / "w.bin"
    src.write_bytes(bytes(range(256)) * 4)
    digest, size = store.put_file(src)
    store.put_record("d" * 64, {"files": {"w.bin": {"sha256": digest, "size": size}}})
    blob = store.blob_path(digest)
    os.chmod(blob, 0o644)
    if damage == "delete":
        blob.unlink()
    elif damage == "truncate":
        blob.write_bytes(blob.read_bytes()[:-1])
    else:
        data = bytearray(blob.read_bytes())
        data[7] ^= 1
        blob.write_bytes(bytes(data))
    assert store.get_record("d" * 64) is None
    assert not store.record_path("d" * 64).exists()
    assert not blob.exists()  # a blob whose bytes no longer match its name is dropped too


def test_materialize_gives_an_editable_copy_that_cannot_corrupt_the_store(store, tmp_path):
    src = tmp_path / "x"
    src.write_bytes(b"original")
    digest, _ = store.put_file(src)
    dest = tmp_path / "out" / "x"
    how = store.materialize(digest, dest)
    assert how in ("reflink", "copy") and dest.read_bytes() == b"original"
    dest.write_bytes(b"edited")
    assert store.blob_path(digest).read_bytes() == b"original"
