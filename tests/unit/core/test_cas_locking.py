"""The content-addressed store's lock: gc and cache verify wait for running builds, which share it."""

from __future__ import annotations

import threading
import time

from tritonbuild.core.cas import Store


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
    assert not store.blob_path(
        digest
    ).exists()  # unreferenced once the build is gone: gc may now drop it


def test_builds_share_the_cache_lock(tmp_path):
    store = Store(tmp_path / "cache")
    with store.lock(shared=True), store.lock(shared=True):
        pass


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
