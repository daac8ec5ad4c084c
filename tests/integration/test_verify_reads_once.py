"""verify reads each model directory once (issue 44, item 4): every rule, stand-in and check gets the
parsed model directory instead of opening config.pbtxt again. Counted on the bundled examples (Python,
PyTorch, ONNX, an ensemble and a BLS model: the embedded server, Triton's core through stand-ins and
the in-process runners all run), by counting this process's opens of each model's config.pbtxt."""

from __future__ import annotations

import builtins
import io
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.triton, pytest.mark.slow]


def _counting_opens(monkeypatch, root: Path) -> Counter:
    """Opens of root/<model>/config.pbtxt by this process (pathlib, open(), shutil all go through
    io.open), per model; the stand-ins' copies in a scratch directory are not the model's file."""
    opened: Counter = Counter()
    real = io.open

    def counting(file, *args, **kwargs):
        if not isinstance(file, int):
            path = Path(file)
            if path.name == "config.pbtxt" and path.parent.parent == root:
                opened[path.parent.name] += 1
        return real(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", counting)
    monkeypatch.setattr(builtins, "open", counting)
    return opened


def test_verify_reads_each_models_config_once(tmp_path, monkeypatch):
    from tritonbuild.verify.run import verify

    root = tmp_path / "repo"
    shutil.copytree(ROOT / "model_repository", root)
    opened = _counting_opens(monkeypatch, root)
    report = verify(root)
    monkeypatch.undo()
    assert report.passed, [m.model_dump() for m in report.models if not m.passed]
    names = sorted(p.parent.name for p in root.glob("*/config.pbtxt"))
    assert len(names) == 6
    assert dict(opened) == dict.fromkeys(names, 1)


def test_lint_reads_each_models_config_once(tmp_path, monkeypatch):
    """A hand-written repository (no manifest): the load rules, the models the embedded server runs
    itself (copied whole but for the config, written from the bytes read) and the stand-ins."""
    from tritonbuild.verify.run import verify

    root = tmp_path / "repo"
    shutil.copytree(
        ROOT / "model_repository",
        root,
        ignore=shutil.ignore_patterns("tritonbuild-*.json", "golden-v*.npz"),
    )
    opened = _counting_opens(monkeypatch, root)
    report = verify(root)
    monkeypatch.undo()
    assert report.passed, [f.model_dump() for f in report.static if not f.ok]
    assert dict(opened) == dict.fromkeys(sorted(p.name for p in root.iterdir()), 1)


def test_the_count_sees_a_second_read(tmp_path, monkeypatch):
    """The counter is not blind: a second read of one config is counted."""
    from tritonbuild.triton.config import read_config

    root = tmp_path / "repo"
    shutil.copytree(ROOT / "model_repository" / "risk-scorer", root / "risk-scorer")
    opened = _counting_opens(monkeypatch, root)
    read_config(root / "risk-scorer")
    (root / "risk-scorer" / "config.pbtxt").read_bytes()
    with open(root / "risk-scorer" / "config.pbtxt", "rb"):
        pass
    assert opened == {"risk-scorer": 3}
