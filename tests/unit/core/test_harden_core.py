"""Issue #14 in core/: the file-hash cache sees same-size, same-mtime rewrites; OUT is swapped atomically;
'cache gc' waits for running builds; path helpers keep reads and writes inside their roots."""

from __future__ import annotations

import os
import threading
import time

import pytest

from tritonbuild.core import fsutil
from tritonbuild.core.cas import Store
from tritonbuild.core.hashing import FileHashCache, sha256_bytes
from tritonbuild.core.paths import PathProblem, check_tree, inside, read_regular


def test_hash_cache_sees_a_rewrite_that_keeps_size_and_mtime(tmp_path):
    f = tmp_path / "weights.bin"
    f.write_bytes(b"A" * 64)
    cache = FileHashCache(tmp_path / "hashes.json")
    assert cache.sha256(f) == sha256_bytes(b"A" * 64)
    st = os.stat(f)
    time.sleep(0.01)  # ctime has nanosecond resolution here; make sure it moves
    with open(f, "r+b") as h:  # same inode, same size
        h.write(b"B" * 64)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # what cp -p / rsync -t / tar x do
    assert os.stat(f).st_mtime_ns == st.st_mtime_ns and os.stat(f).st_size == st.st_size
    assert cache.sha256(f) == sha256_bytes(b"B" * 64)
    cache.save()
    assert FileHashCache(tmp_path / "hashes.json").sha256(f) == sha256_bytes(b"B" * 64)


def test_hash_cache_ignores_entries_of_the_old_format(tmp_path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"new")
    st = os.stat(f)
    cache = FileHashCache(None)
    cache.entries[str(f)] = [st.st_size, st.st_mtime_ns, st.st_ino, "0" * 64]  # (size, mtime, inode) → stale
    assert cache.sha256(f) == sha256_bytes(b"new")


def test_hash_cache_refuses_a_fifo_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "p")
    with pytest.raises(PathProblem, match="FIFO"):
        FileHashCache(None).sha256(tmp_path / "p")
    with pytest.raises(PathProblem, match="character device"):
        FileHashCache(None).sha256("/dev/zero")


@pytest.mark.slow
def test_replace_dir_never_leaves_the_target_missing(tmp_path):
    target = tmp_path / "OUT"
    target.mkdir()
    (target / "v").write_text("0")
    assert fsutil.exchange is not None and fsutil._renameat2() is not None, "Linux with glibc >= 2.28 here"
    missing, stop = [], threading.Event()

    def poll():
        while not stop.is_set():
            if not (target / "v").exists():
                missing.append(time.monotonic())

    t = threading.Thread(target=poll)
    t.start()
    try:
        for i in range(1, 200):
            staging = tmp_path / f".OUT.staging-{i}"
            staging.mkdir()
            (staging / "v").write_text(str(i))
            fsutil.replace_dir(staging, target)
            assert not staging.exists()
    finally:
        stop.set()
        t.join()
    assert (target / "v").read_text() == "199"
    assert missing == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["OUT"]  # no old trees left behind


def test_replace_dir_falls_back_to_two_renames_where_exchange_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(fsutil, "exchange", lambda a, b: False)
    target, staging = tmp_path / "OUT", tmp_path / "S"
    target.mkdir()
    staging.mkdir()
    (staging / "new").write_text("1")
    fsutil.replace_dir(staging, target)
    assert [p.name for p in target.iterdir()] == ["new"] and sorted(p.name for p in tmp_path.iterdir()) == ["OUT"]


def test_atomic_writer_fsyncs_before_the_rename(tmp_path, monkeypatch):
    order = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(fsutil.os, "fsync", lambda fd: (order.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(fsutil.os, "replace", lambda a, b: (order.append("replace"), real_replace(a, b))[1])
    fsutil.write_atomic(tmp_path / "f", b"x")
    assert order == ["fsync", "replace"] and (tmp_path / "f").read_bytes() == b"x"


def test_gc_waits_for_a_running_build(tmp_path):
    store = Store(tmp_path / "cache")
    blob = tmp_path / "artifact"
    blob.write_bytes(b"weights")
    done = threading.Event()
    with store.lock(shared=True):  # a build: its blob is written, its record not yet
        digest, _ = store.put_file(blob)
        t = threading.Thread(target=lambda: (store.gc(0), done.set()))
        t.start()
        time.sleep(0.3)
        assert not done.is_set() and store.blob_path(digest).exists()
    t.join(10)
    assert done.is_set()
    assert not store.blob_path(digest).exists()  # unreferenced once the build is gone: gc may now drop it


def test_builds_share_the_cache_lock(tmp_path):
    store = Store(tmp_path / "cache")
    with store.lock(shared=True), store.lock(shared=True):
        pass


def test_inside_refuses_escapes_and_links(tmp_path):
    (tmp_path / "ok.npz").write_bytes(b"")
    assert inside(tmp_path, "ok.npz") == tmp_path / "ok.npz"
    (tmp_path / "etc").symlink_to("/etc")
    for rel in ("/etc/passwd", "../x", "a/../../x", "etc/passwd", "x\0y"):
        with pytest.raises(PathProblem):
            inside(tmp_path, rel)


def test_read_regular_caps_and_refuses_devices(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 11)
    assert read_regular(tmp_path / "big", 11) == b"x" * 11
    with pytest.raises(PathProblem, match="larger than 10 bytes"):
        read_regular(tmp_path / "big", 10)
    with pytest.raises(PathProblem, match="character device"):
        read_regular("/dev/zero", 10)


def test_check_tree_allows_hugging_face_snapshot_links(tmp_path):
    repo = tmp_path / "models--org--m"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "abc").write_text("{}")
    snap = repo / "snapshots" / "rev"
    snap.mkdir(parents=True)
    (snap / "config.json").symlink_to("../../blobs/abc")
    check_tree(snap, [__import__("pathlib").Path("config.json")])
    (snap / "zero.bin").symlink_to("/dev/zero")
    with pytest.raises(PathProblem, match="outside"):
        check_tree(snap, [__import__("pathlib").Path("zero.bin")])


def test_cache_verify_waits_for_a_running_build(tmp_path):
    store = Store(tmp_path / "cache")
    done = threading.Event()
    with store.lock(shared=True):
        t = threading.Thread(target=lambda: (store.verify(), done.set()))
        t.start()
        time.sleep(0.3)
        assert not done.is_set()
    t.join(10)
    assert done.is_set()
