"""YAML with positions: every key path maps to its 1-based line, so errors name file:line."""

from __future__ import annotations

import pytest

from tritonbuild.core.yamlio import YamlProblem, load_located

DOC = """\
name: m
inputs:
  - name: X
    dims: [3]
  - name: Y
verify:
  repeats: 2
"""


def test_lines_of_keys_list_items_and_nested_keys():
    located = load_located(DOC)
    assert located.data["inputs"][1]["name"] == "Y"
    assert located.line_of(("name",)) == 1
    assert located.line_of(("inputs", 0, "dims")) == 4
    assert located.line_of(("inputs", 1, "name")) == 5
    assert located.line_of(("verify", "repeats")) == 7


def test_a_missing_key_falls_back_to_its_nearest_parent():
    located = load_located(DOC)
    assert located.line_of(("verify", "samples")) == located.line_of(("verify",)) == 6


def test_a_syntax_error_names_its_line():
    with pytest.raises(YamlProblem) as e:
        load_located("name: m\ninputs: [1, 2\nverify: {}\n")
    assert e.value.line in (2, 3)
