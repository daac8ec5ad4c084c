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


class _Worker:
    """What xdist's scheduler asks of a worker: the tests it is sent."""

    shutting_down = False

    def __init__(self, name: str):
        self.gateway, self.sent = type("Gateway", (), {"id": name})(), []

    def send_runtest_some(self, indices):
        self.sent += indices

    def shutdown(self):
        self.shutting_down = True


def test_the_workers_are_handed_the_scopes_in_this_order():
    """pytest-xdist's loadscope queues the scopes by their test count, not in collection order, unless told
    not to (--loadscope-reorder, on by default since 3.7): the order above took effect only with
    --no-loadscope-reorder, which ci/test.sh passes. xdist's own scheduler, with the test command's options,
    hands a heavy scope of few tests out before a light one of many."""
    import shlex

    from _pytest.config import _prepareconfig
    from xdist.scheduler import LoadScopeScheduling

    line = next(
        ln for ln in (ROOT / "ci" / "test.sh").read_text().splitlines() if "--dist loadscope" in ln
    )
    words = shlex.split(line.split("set --", 1)[1])  # -n WORKERS --dist ... "$@"
    options = [a for a in words[words.index("--dist") : -1] if not a.startswith("--durations")]
    assert "--no-loadscope-reorder" in options
    collection = ["tests/heavy.py::test_1", *(f"tests/many.py::test_{i}" for i in range(5))]

    def handed_out(args):
        scheduler = LoadScopeScheduling(_prepareconfig(["-p", "xdist", "--tx", "2*popen", *args]))
        workers = [_Worker("gw0"), _Worker("gw1")]
        for worker in workers:
            scheduler.add_node(worker)
        for worker in workers:
            scheduler.add_node_collection(worker, collection)
        scheduler.schedule()
        return [collection[w.sent[0]] for w in workers]

    assert handed_out(options) == ["tests/heavy.py::test_1", "tests/many.py::test_0"]
    # without the option, xdist's default puts the scope of more tests first
    without = [a for a in options if a != "--no-loadscope-reorder"]
    assert handed_out(without) == ["tests/many.py::test_0", "tests/heavy.py::test_1"]
