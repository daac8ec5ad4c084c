"""Each backend's load rules on its model files come from the registry: check_model_dir names no backend,
so a backend registered only here (tests/plugins/toyrt.py) gets its checks run, in the same places as the
built-in ones (model_file → also_writes → offline_checks → triton-rules → model_content_checks)."""

from __future__ import annotations

import pytest

from tests.plugins.toyrt import ToyBackend, ToyPythonBackend, write_model
from tritonbuild.backends import REGISTRY
from tritonbuild.repository.rules import check_model_dir


@pytest.fixture
def toys():
    with REGISTRY.registered(ToyBackend()), REGISTRY.registered(ToyPythonBackend()):
        yield


def _rows(d, **kw) -> dict[str, tuple[bool, str]]:
    return {f.check: (f.ok, f.detail) for f in check_model_dir(d, **kw)}


def test_a_registered_backend_gets_its_model_file_checks_by_its_backend_field(tmp_path, toys):
    d = write_model(tmp_path, "m", 'backend: "toyrt"', {"model.toy": b"not a toy"})
    checks = [f.check for f in check_model_dir(d)]
    assert checks[3:] == ["model_file", "toy.header", "triton-rules"], (
        checks
    )  # a build does not open files
    rows = _rows(d, model_files=True)
    assert list(rows)[-1] == "toy.graph" and rows["toy.graph"] == (True, "opened 1/model.toy")
    assert rows["model_file"] == (True, "model.toy present in every version")
    assert rows["toy.header"] == (False, "1/model.toy does not start with b'TOY'")


def test_a_platform_only_config_is_mapped_to_its_backend_through_model_files(tmp_path, toys):
    d = write_model(tmp_path, "m", 'platform: "toy_graph"', {})
    rows = _rows(d, model_files=True)
    assert rows["model_file"] == (
        False,
        "1/model.toy is missing (the toyrt backend loads that file)",
    )
    assert rows["toy.header"][0] and rows["toy.graph"] == (True, "opened ")


def test_a_backend_that_also_writes_python_models_checks_only_its_own(tmp_path, toys):
    ours = write_model(tmp_path, "ours", 'backend: "python"', {"model.py": b"", "toy.json": b"{"})
    checks = [f.check for f in check_model_dir(ours)]
    assert checks[3:] == ["model_file", "toy-py", "triton-rules"], (
        checks
    )  # after the python backend's own
    assert not _rows(ours)["toy-py"][0] and "1/toy.json is not JSON" in _rows(ours)["toy-py"][1]
    theirs = write_model(tmp_path, "theirs", 'backend: "python"', {"model.py": b""})
    assert "toy-py" not in _rows(theirs)


def test_unregistered_the_toy_rules_are_gone(tmp_path):
    d = write_model(tmp_path, "m", 'backend: "toyrt"', {"model.toy": b"not a toy"})
    ok, detail = _rows(d, model_files=True)["model_file"]
    assert ok and detail.startswith("not checked: tritonbuild has no rules for backend toyrt")
    assert "toy.header" not in _rows(d, model_files=True)


@pytest.mark.parametrize("platform", ["onnxruntime_onnx", "tensorrt_plan", "pytorch_libtorch"])
def test_a_platform_only_config_needs_its_default_model_file(tmp_path, platform):
    """Triton maps a config with only a platform to its backend, which loads its default file: a missing one
    passed the model_file row ('? present in every version') before the registry mapped the platform."""
    owner = REGISTRY.for_config("", platform)
    filename = owner.model_files[platform]
    d = write_model(tmp_path, "m", f'platform: "{platform}"', {"other.bin": b""})
    ok, detail = _rows(d)["model_file"]
    assert (
        not ok
        and detail
        == f"1/{filename} is missing (the {owner.triton_backend} backend loads that file)"
    )
