"""OUT is swapped atomically (never missing, with a fallback where the exchange is refused); atomic writes
fsync before the rename."""

from __future__ import annotations

import os
import threading
import time

import pytest

from tritonbuild.core import fsutil


@pytest.mark.slow
def test_replace_dir_never_leaves_the_target_missing(tmp_path):
    target = tmp_path / "OUT"
    target.mkdir()
    (target / "v").write_text("0")
    assert fsutil.exchange is not None and fsutil._renameat2() is not None, (
        "Linux with glibc >= 2.28 here"
    )
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
    assert [p.name for p in target.iterdir()] == ["new"] and sorted(
        p.name for p in tmp_path.iterdir()
    ) == ["OUT"]


def test_atomic_writer_fsyncs_before_the_rename(tmp_path, monkeypatch):
    order = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(fsutil.os, "fsync", lambda fd: (order.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(
        fsutil.os, "replace", lambda a, b: (order.append("replace"), real_replace(a, b))[1]
    )
    fsutil.write_atomic(tmp_path / "f", b"x")
    assert order == ["fsync", "replace"] and (tmp_path / "f").read_bytes() == b"x"
