"""The distribution installs every source package under the import name `tritonbuild`."""

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # 3.11+

ROOT = Path(__file__).resolve().parents[2]


def test_every_source_package_is_listed_in_pyproject():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert meta["package-dir"] == {"tritonbuild": "builder"}
    on_disk = {
        "tritonbuild" + "".join("." + part for part in p.parent.relative_to(ROOT / "builder").parts)
        for p in (ROOT / "builder").rglob("__init__.py")
    }
    assert on_disk == set(meta["packages"]), (
        "add new packages to [tool.setuptools] packages in pyproject.toml"
    )


def test_import_name_is_tritonbuild():
    import tritonbuild

    assert Path(tritonbuild.__file__).resolve().parent == ROOT / "builder"


def _meta() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _reqs(specs):
    from packaging.requirements import Requirement

    return {(r := Requirement(s)).name.lower(): r for s in specs}


def test_core_takes_ranges_that_leave_an_existing_environment_alone():
    """Installing the core into numpy 2.2.6 / protobuf 5.29.5 / tritonclient 2.72.0 must not move them."""
    core = _reqs(_meta()["dependencies"])
    assert not [
        r for r in core.values() if any(s.operator in ("==", "===") for s in r.specifier)
    ], "exact versions belong in ci/constraints.txt, not in library metadata"
    for name, existing in {
        "numpy": ["1.26.4", "2.2.6"],
        "protobuf": ["5.29.5", "6.33.6"],
        "tritonclient": ["2.72.0", "2.73.0"],
    }.items():
        for version in existing:
            assert core[name].specifier.contains(version), (
                f"{name} {version} is refused by {core[name]}"
            )
    assert "grpc" not in core["tritonclient"].extras, "the grpc extra forces protobuf >= 6.30"
    assert "jinja2" not in core and "tokenizers" not in core


def test_extras_match_roles_and_all_covers_them():
    extras = {k: _reqs(v) for k, v in _meta()["optional-dependencies"].items()}
    assert {"embedded", "onnx", "torch", "llm", "s3", "gcs", "azure", "all", "test"} <= set(extras)
    assert "tokenizers" in extras["llm"]
    roles = {
        n for k in ("embedded", "onnx", "torch", "llm", "s3", "gcs", "azure") for n in extras[k]
    }
    assert roles <= set(extras["all"])
    for role in ("embedded", "onnx", "torch", "llm", "s3"):
        assert set(extras[role]) <= set(extras["test"]), role
    for reqs in extras.values():
        assert not [r for r in reqs.values() if any(s.operator == "==" for s in r.specifier)]
    # onnxruntime >= 1.24 has no cp310 wheel: the range must admit one that has.
    assert extras["onnx"]["onnxruntime"].specifier.contains("1.23.2")


def test_constraints_pin_exactly_and_keep_the_local_cpu_torch():
    from packaging.requirements import Requirement

    lines = [
        ln.split("#")[0].strip()
        for ln in (ROOT / "ci" / "constraints.txt").read_text().splitlines()
    ]
    pins = [Requirement(ln) for ln in lines if ln]
    assert all(len(r.specifier) == 1 and next(iter(r.specifier)).operator == "==" for r in pins)
    assert "torch==2.13.0" in lines
    for script in ("test.sh", "examples.sh"):
        assert "-c ci/constraints.txt" in (ROOT / "ci" / script).read_text(), script
    core = _reqs(_meta()["dependencies"])
    for r in pins:  # every pin must satisfy the library's own range
        if r.name.lower() in core:
            assert core[r.name.lower()].specifier.contains(str(next(iter(r.specifier)).version)), r


def test_no_source_imports_jinja2():
    assert not [p for p in (ROOT / "builder").rglob("*.py") if "jinja2" in p.read_text()]


def test_every_python_the_readme_names_is_smoke_tested_in_ci():
    import re

    readme = (ROOT / "README.md").read_text()
    lo, hi = re.search(r"Python 3\.(\d+)–3\.(\d+), Linux", readme).groups()
    named = {f"3.{m}" for m in range(int(lo), int(hi) + 1)}
    script = (ROOT / "ci" / "smoke-pythons.sh").read_text()
    smoked = set(re.search(r"VERSIONS=\(([\d. ]+)\)", script).group(1).split())
    ci_venv = "3.11"  # ci/test.sh's own venv runs the whole suite
    assert named - {ci_venv} <= smoked, (
        f"README names {sorted(named)}; the smoke covers {sorted(smoked)}"
    )
    assert "ci/smoke-pythons.sh" in (ROOT / "ci" / "test.sh").read_text()
    meta = _meta()
    assert meta["requires-python"] == f">=3.{lo},<3.{int(hi) + 1}"


def test_no_extra_brings_the_embedded_servers_numpy_pin():
    """nvidia-pytriton declares numpy < 2 and (through tritonclient[grpc]) protobuf >= 6: it goes into the
    environment tritonbuild makes for the embedded server (server/toolenv.py), never through an extra."""
    from packaging.requirements import Requirement

    from tritonbuild.server import toolenv

    extras = {k: _reqs(v) for k, v in _meta()["optional-dependencies"].items()}
    assert [k for k, reqs in extras.items() if "nvidia-pytriton" in reqs] == []
    assert not Requirement(toolenv.NUMPY).specifier.contains("2.0.0")
    assert Requirement(toolenv.PYTRITON).specifier.contains("0.7.0")  # tritonserver 2.51.0 (FACTS)
