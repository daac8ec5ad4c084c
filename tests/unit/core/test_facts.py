"""Upstream release facts the builder reads are package data (builder/facts/*.json, shipped in the
wheel) read by one loader, tritonbuild.core.facts; tests/contracts checks that data against
upstream. No builder module keeps a Python copy of them or cites tests/ as their source."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT
from tritonbuild.core import facts

tomllib = pytest.importorskip("tomllib")  # 3.11+
SHIPPED = sorted(p.stem for p in (ROOT / "builder" / "facts").glob("*.json"))


def test_the_builder_facts_are_shipped_as_package_data():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["tritonbuild"]
    assert "facts/*.json" in globs
    assert {"triton_images", "triton_image_pythons", "vllm_engine_args"} <= set(SHIPPED)
    assert sorted(facts.names()) == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_each_fact_file_loads_and_names_its_provenance(name):
    doc = facts.load(name)
    assert doc["_about"], "say what the file records and the command that re-derives it"
    sources = re.findall(r'"(?:repository|wheel_sha256)": "([^"]+)"', str(doc).replace("'", '"'))
    assert sources, f"{name}.json names no upstream repository or wheel"


def test_an_unknown_fact_is_a_clear_error():
    with pytest.raises(KeyError, match=r"no_such_fact.*triton_images"):
        facts.load("no_such_fact")


def test_no_builder_module_cites_tests_for_a_shipped_fact():
    """A fact the package ships is cited at builder/facts/, never at tests/contracts/facts/."""
    cited = {
        f"{p.relative_to(ROOT)}: {name}"
        for p in sorted((ROOT / "builder").rglob("*.py"))
        for name in SHIPPED
        if re.search(
            rf"tests/contracts/facts/{name}\.json|tests/contracts\S* .*\b{name}\.json",
            p.read_text(),
        )
    }
    assert not cited, sorted(cited)


def test_no_shipped_fact_is_left_under_tests():
    left = sorted(p.stem for p in (ROOT / "tests" / "contracts" / "facts").glob("*.json"))
    assert not set(left) & set(SHIPPED)
