"""The distribution installs every source package under the import name `tritonbuild`."""
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # 3.11+

ROOT = Path(__file__).resolve().parents[2]


def test_every_source_package_is_listed_in_pyproject():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert meta["package-dir"] == {"tritonbuild": "builder"}
    on_disk = {"tritonbuild" + "".join("." + part for part in p.parent.relative_to(ROOT / "builder").parts)
               for p in (ROOT / "builder").rglob("__init__.py")}
    assert on_disk == set(meta["packages"]), "add new packages to [tool.setuptools] packages in pyproject.toml"


def test_import_name_is_tritonbuild():
    import tritonbuild
    assert Path(tritonbuild.__file__).resolve().parent == ROOT / "builder"
