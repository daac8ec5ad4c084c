"""The plugin wheel a vLLM model served `determinism: invariant` ships (backends/_vllm_invariant.py): a wheel pip
and importlib.metadata read (vLLM finds general plugins through entry points), byte-identical for the same source."""

from __future__ import annotations

import zipfile

from tritonbuild.backends import _vllm_invariant
from tritonbuild.server.toolenv import unpack_wheels


def test_the_wheel_is_the_same_bytes_each_time(tmp_path):
    a = _vllm_invariant.plugin_wheel(tmp_path / "a")
    b = _vllm_invariant.plugin_wheel(tmp_path / "b")
    assert a.name == b.name == _vllm_invariant.wheel_name() and a.read_bytes() == b.read_bytes()


def test_the_wheel_declares_vllms_general_plugin_entry_point(tmp_path):
    wheel = _vllm_invariant.plugin_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/entry_points.txt"))
        entry_points = z.read(f"{info}/entry_points.txt").decode()
        record = z.read(f"{info}/RECORD").decode()
        module = z.read(f"{_vllm_invariant.DIST}.py")
    assert "[vllm.general_plugins]" in entry_points
    assert f"{_vllm_invariant.ENTRY_POINT_NAME} = {_vllm_invariant.DIST}:register" in entry_points
    assert module == _vllm_invariant.PLUGIN_SOURCE.read_bytes()
    assert all(any(line.startswith(name + ",") for line in record.splitlines()) for name in names)


def test_unpacked_the_entry_point_is_found_by_importlib_metadata(tmp_path):
    from importlib import metadata

    site = unpack_wheels([_vllm_invariant.plugin_wheel(tmp_path / "w")], tmp_path / "site")
    found = [ep for dist in metadata.distributions(path=[str(site)]) for ep in dist.entry_points
             if ep.group == "vllm.general_plugins"]
    assert [ep.name for ep in found] == [_vllm_invariant.ENTRY_POINT_NAME]
