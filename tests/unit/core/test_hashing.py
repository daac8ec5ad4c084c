"""The file-hash cache sees same-size, same-mtime rewrites, drops entries of an old format and never blocks
on a FIFO."""

from __future__ import annotations

import os
import time

import pytest

from tritonbuild.core.hashing import FileHashCache, sha256_bytes
from tritonbuild.core.paths import PathProblem


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
    cache.entries[str(f)] = [
        st.st_size,
        st.st_mtime_ns,
        st.st_ino,
        "0" * 64,
    ]  # (size, mtime, inode) → stale
    assert cache.sha256(f) == sha256_bytes(b"new")


def test_hash_cache_refuses_a_fifo_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "p")
    with pytest.raises(PathProblem, match="FIFO"):
        FileHashCache(None).sha256(tmp_path / "p")
    with pytest.raises(PathProblem, match="character device"):
        FileHashCache(None).sha256("/dev/zero")
