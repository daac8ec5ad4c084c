"""Path helpers keep reads and writes inside their roots (escapes, links, devices, size caps), allowing
Hugging Face snapshot links."""

from __future__ import annotations

import pytest

from tritonbuild.core.paths import PathProblem, check_tree, inside, read_regular


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
