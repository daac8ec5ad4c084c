"""One golden-mismatch function (verify/goldens.py:mismatches) for every place answers are compared
with expected ones: verify's repeats, batches and concurrency, a generative model under load, the
machine classes, tune's probes and `tritonbuild infer` (issue 44, item 4)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from tests.conftest import ROOT
from tritonbuild.recipe.models import Tolerance
from tritonbuild.verify.goldens import mismatches


def test_each_differing_output_once_in_the_expected_order():
    expected = {"A": np.array([1.0, 2.0], np.float32), "B": np.array([3], np.int64)}
    assert mismatches(expected, dict(expected), sample=0, context="c") == []
    got = {"A": np.array([1.0, 2.5], np.float32)}  # B missing
    found = mismatches(expected, got, sample=4, context="repeat 1")
    assert [(m.output, m.sample, m.context.split(":")[0]) for m in found] == [
        ("A", 4, "repeat 1"),
        ("B", 4, "repeat 1"),
    ]
    assert found[0].differing == 1 and found[0].first_index == [1] and not found[0].within_tolerance


def test_a_tolerance_marks_what_it_allows():
    expected = {"A": np.array([1.0], np.float32)}
    got = {"A": np.array([1.0000001], np.float32)}
    (loose,) = mismatches(
        expected, got, sample=0, context="", tolerance={"A": Tolerance(atol=1e-3)}
    )
    assert loose.within_tolerance
    (strict,) = mismatches(expected, got, sample=0, context="")
    assert not strict.within_tolerance


def test_infer_tells_equal_strings_bit_exact():
    """BYTES answers are object arrays: `tritonbuild infer` compared their bytes (the objects'
    addresses), so an equal answer read as 'differs'."""
    from tritonbuild.verify.infer import _compare

    want = {"S": np.array([b"abc", b"d"], dtype=np.object_), "Y": np.array([1.5], np.float32)}
    same = {"S": np.array([b"abc".decode().encode(), b"d"], dtype=np.object_), "Y": want["Y"] + 0}
    assert _compare(same, want) == "bit-exact"
    other = {"S": np.array([b"abc", b"e"], dtype=np.object_), "Y": np.array([2.0], np.float32)}
    assert _compare(other, want) == "S: differs; Y: differs (max |diff| 0.5)"
    assert _compare({"Y": want["Y"]}, want) == "S: missing vs golden object [2]"


# the modules that compare answers with expected ones; each calls mismatches, none loops over
# compare (publish/probe.py runs alone in the serving image: standard library and numpy only)
COMPARING = [
    "verify/answers.py",
    "verify/under_load.py",
    "verify/classes.py",
    "verify/infer.py",
    "tune/probes.py",
]


def _compare_calls(text: str) -> int:
    return sum(
        isinstance(node, ast.Call) and getattr(node.func, "id", None) == "compare"
        for node in ast.walk(ast.parse(text))
    )


def test_no_module_but_goldens_calls_compare():
    sources = {
        str(p.relative_to(ROOT / "builder")): p.read_text()
        for p in sorted((ROOT / "builder").rglob("*.py"))
    }
    assert [path for path, text in sources.items() if _compare_calls(text)] == ["verify/goldens.py"]
    for path in COMPARING:
        assert "mismatches(" in sources[path], path
    # broken on purpose: a loop of its own is seen
    assert _compare_calls(sources["tune/probes.py"] + "\nm = compare(a, b, sample=0)\n") == 1
    assert Path(ROOT / "builder" / "publish" / "probe.py").is_file()
