"""docs/ARCHITECTURE.md stays current with the code: its layer list is the order tests/unit/test_layers.py
enforces, and every file it names exists."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import ROOT
from tests.unit.test_layers import RANK

DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text()


def test_the_layer_list_is_the_enforced_order():
    text = re.search(r"Layers, lower first:(.*?)\. ", DOC, re.S)
    assert text, "docs/ARCHITECTURE.md lost its 'Layers, lower first:' sentence"
    groups = [re.findall(r"`(\w+)`", group) for group in text.group(1).split("→")]
    enforced = {}
    for name, rank in RANK.items():
        enforced.setdefault(rank, set()).add(name)
    assert [set(g) for g in groups] == [enforced[rank] for rank in sorted(enforced)]


def test_every_file_it_names_exists():
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    named = set(re.findall(r"`([\w./-]+/[\w.-]+\.(?:py|sh|md|json|yaml|txt))`", DOC))
    # A path is named from the root or from inside its package (`cli/common.py`, `tensorrtllm/argv.py`).
    missing = sorted(n for n in named if not any(t == n or t.endswith("/" + n) for t in tracked))
    assert missing == []
