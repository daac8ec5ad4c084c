"""The plugin wheel a vLLM model served `determinism: invariant` ships (backends/vllm/invariant/wheel.py): a wheel pip
and importlib.metadata read (vLLM finds general plugins through entry points), byte-identical for the same source."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from tritonbuild.backends.vllm.invariant import wheel as invariant
from tritonbuild.server.toolenv import unpack_wheels


def test_the_wheel_is_the_same_bytes_each_time(tmp_path):
    a = invariant.plugin_wheel(tmp_path / "a")
    b = invariant.plugin_wheel(tmp_path / "b")
    assert a.name == b.name == invariant.wheel_name() and a.read_bytes() == b.read_bytes()


def test_the_wheel_declares_vllms_general_plugin_entry_point(tmp_path):
    wheel = invariant.plugin_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/entry_points.txt"))
        entry_points = z.read(f"{info}/entry_points.txt").decode()
        record = z.read(f"{info}/RECORD").decode()
        package = {n: z.read(n) for n in names if n.startswith(f"{invariant.DIST}/")}
    assert "[vllm.general_plugins]" in entry_points
    assert f"{invariant.ENTRY_POINT_NAME} = {invariant.DIST}:register" in entry_points
    # the plugin as the package's __init__ (what DIST:register imports), the W4A16 kernel, the fp16 linear and the
    # sampling filter it imports beside it
    assert package == {
        f"{invariant.DIST}/__init__.py": invariant.PLUGIN_SOURCE.read_bytes(),
        f"{invariant.DIST}/w4a16.py": invariant.KERNEL_SOURCE.read_bytes(),
        f"{invariant.DIST}/linear16.py": invariant.PLUGIN_SOURCE.with_name(
            "linear16.py"
        ).read_bytes(),
        f"{invariant.DIST}/sampling.py": invariant.PLUGIN_SOURCE.with_name(
            "sampling.py"
        ).read_bytes(),
    }
    assert all(any(line.startswith(name + ",") for line in record.splitlines()) for name in names)


def test_a_changed_fp16_linear_is_a_new_wheel_version(tmp_path, monkeypatch):
    before = invariant.plugin_version()
    changed = tmp_path / "linear16.py"
    changed.write_bytes(invariant.PACKAGE["linear16.py"].read_bytes() + b"# changed\n")
    monkeypatch.setitem(invariant.PACKAGE, "linear16.py", changed)
    assert invariant.plugin_version() != before


def test_unpacked_the_entry_point_is_found_by_importlib_metadata(tmp_path):
    from importlib import metadata

    site = unpack_wheels([invariant.plugin_wheel(tmp_path / "w")], tmp_path / "site")
    found = [
        ep
        for dist in metadata.distributions(path=[str(site)])
        for ep in dist.entry_points
        if ep.group == "vllm.general_plugins"
    ]
    assert [ep.name for ep in found] == [invariant.ENTRY_POINT_NAME]


def _recipe(image: str, determinism: str = "invariant"):
    from tritonbuild.backends.vllm.recipe import VLLMRecipe

    return VLLMRecipe.model_validate(
        {
            "name": "m",
            "version": 1,
            "backend": "vllm",
            "checkpoint": {"path": "ckpt"},
            "serving": {"determinism": determinism},
            "image": {"triton_image": image},
        }
    )


def test_invariant_is_refused_for_an_image_whose_vllm_the_plugin_is_not_recorded_for():
    old = _recipe("nvcr.io/nvidia/tritonserver:25.12-vllm-python-py3")
    message, hint = invariant.determinism_problem(old)
    assert "ships vLLM 0.11.1" in message and "26.06 (vLLM 0.22.1)" in hint
    assert (
        invariant.determinism_problem(_recipe("nvcr.io/nvidia/tritonserver:26.06-vllm-python-py3"))
        is None
    )
    assert invariant.determinism_problem(_recipe("registry.example/own:1", "default")) is None
    message, _ = invariant.determinism_problem(_recipe("registry.example/own:1"))
    assert "a vLLM tritonbuild has not recorded" in message


def test_the_recorded_vllm_is_the_one_the_plugin_facts_were_read_from():
    from tests.contracts.facts import load

    version = load("vllm_plugin")["source"]["version"]
    assert ".".join(version.split(".")[:2]) in invariant.RECORDED_VLLM


def test_the_unpacked_wheel_imports_as_its_own_package_with_the_kernel_beside_the_plugin(tmp_path):
    """What vLLM's entry point imports: the package alone (no tritonbuild), the plugin reaching the kernel through
    its relative import."""
    with zipfile.ZipFile(invariant.plugin_wheel(tmp_path / "wheel")) as z:
        z.extractall(tmp_path / "site")
    probe = (
        f"import {invariant.DIST} as p; "
        "assert p.w4a16.__name__ == p.__name__ + '.w4a16' and callable(p.w4a16.w4a16_matmul); "
        "assert callable(p.register) and p.KERNEL_NAME; "
        "import sys; assert not any(m.startswith('tritonbuild.') or m == 'tritonbuild' for m in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path / "site",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
