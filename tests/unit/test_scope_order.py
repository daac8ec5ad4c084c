"""The full run's order (tests/conftest.py): the heaviest xdist scopes first whatever their markers, from the weights
ci/timeline.py --weights writes out of a measured timeline, then the other slow tests, then the rest."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from tests import conftest

ROOT = Path(__file__).resolve().parents[2]


def _timeline():
    spec = importlib.util.spec_from_file_location("timeline", ROOT / "ci" / "timeline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_weights_sum_busy_seconds_per_loadscope_unit_and_drop_the_light():
    rows = [
        {"test": "tests/a.py::test_x[1]", "start": 0.0, "end": 8.0},
        {"test": "tests/a.py::test_y", "start": 8.0, "end": 14.0},
        {"test": "tests/b.py::TestK::test_m", "start": 0.0, "end": 30.0},
        {"test": "tests/b.py::TestL::test_n[p]", "start": 0.0, "end": 12.0},
        {"test": "tests/c.py::test_quick", "start": 0.0, "end": 2.0},
    ]
    made = _timeline().weights(rows, "a run")
    assert made == {
        "measured": "a run",
        "seconds": {"tests/a.py": 14, "tests/b.py::TestK": 30, "tests/b.py::TestL": 12},
    }


class _Item:
    def __init__(self, nodeid: str, slow: bool):
        self.nodeid, self.keywords = nodeid, {"slow": True} if slow else {}

    def add_marker(self, marker):
        raise AssertionError("no marker expected here")


def test_heaviest_scope_first_then_slow_and_a_scope_keeps_its_order(monkeypatch):
    weights = {"tests/heavy.py": 300, "tests/mid.py::TestC": 100, "tests/corpus.py::TestK": 200}
    monkeypatch.setattr(conftest, "_scope_weights", lambda: weights)
    monkeypatch.setattr(conftest, "_triton_available", lambda: None)
    monkeypatch.setattr(conftest.shutil, "which", lambda name: "/bin/" + name)
    items = [
        _Item("tests/fast.py::test_a", False),
        _Item("tests/light.py::test_b", True),
        _Item("tests/mid.py::TestC::test_1", True),
        _Item("tests/heavy.py::test_2", True),
        _Item("tests/heavy.py::test_1", True),
        _Item("tests/mid.py::TestC::test_0", True),
        _Item("tests/corpus.py::TestK::test_v", False),  # heavy, not marked slow
    ]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == [
        "tests/heavy.py::test_2",
        "tests/heavy.py::test_1",
        "tests/corpus.py::TestK::test_v",
        "tests/mid.py::TestC::test_1",
        "tests/mid.py::TestC::test_0",
        "tests/light.py::test_b",
        "tests/fast.py::test_a",
    ]


def test_the_committed_weights_name_scopes_that_exist():
    weights = json.loads((ROOT / "tests" / "scope_weights.json").read_text())
    assert weights["measured"] and weights["seconds"]
    for name in weights["seconds"]:
        module, _, cls = name.partition("::")
        path = ROOT / module
        assert path.is_file(), f"{name}: no such test module (re-measure: ci/timeline.py --weights)"
        assert not cls or f"class {cls}" in path.read_text(), f"{name}: no such class"
