"""No stage names a backend (#10): repository/ and verify/ ask the registry. Every string constant in their
source that equals a registered backend's name, Triton backend, platform or default model file fails here; the
names come from the registry itself, so a backend added later is covered too."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import ROOT
from tritonbuild.backends import REGISTRY

SOURCE = ROOT / "builder"
STAGES = ("repository", "verify")
# Ports of Triton's core, which names platforms itself: its own words are the contract there, not ours.
TRITON_CORE = {
    "repository/triton_rules.py": "model_config_utils.cc GetBackendTypeFromPlatform / default-backend guessing",
    "repository/triton_ensemble_rules.py": "ensemble_utils.cc: the ensemble is core's scheduler, no backend library",
    "verify/triton_core.py": "the stand-in model is a Python-backend model (the embedded server has only that "
                             "backend); ensembles are core's scheduler",
}


def _backend_words() -> set[str]:
    words = set()
    for backend in REGISTRY.all():
        files = backend.model_files or {}
        words |= {backend.name, backend.triton_backend, *files, *files.values()}
    return words - {""}


def _named(source: str, label: str) -> list[str]:
    words = _backend_words()
    return [f"{label}:{node.lineno}: {node.value!r}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words]


@pytest.mark.parametrize("path", [p for stage in STAGES for p in sorted((SOURCE / stage).rglob("*.py"))
                                  if p.relative_to(SOURCE).as_posix() not in TRITON_CORE],
                         ids=lambda p: p.relative_to(SOURCE).as_posix())
def test_stage_names_no_backend(path):
    hits = _named(path.read_text(), str(path.relative_to(SOURCE)))
    assert not hits, f"{hits}: ask backends.REGISTRY (for_config, for_manifest, a Backend attribute) instead"


@pytest.mark.parametrize("rel", sorted(TRITON_CORE))
def test_each_exemption_is_still_needed(rel):
    assert _named((SOURCE / rel).read_text(), rel), f"{rel} names no backend any more: drop it from TRITON_CORE"


def test_the_scan_sees_a_literal():
    """The check can fail: rules.py's old branches on a backend and a platform are found."""
    old = 'if backend == "tensorrtllm":\n    pass\nelif mc.platform == "onnxruntime_onnx":\n    pass\n'
    assert [hit.split(": ")[1] for hit in _named(old, "old")] == ["'tensorrtllm'", "'onnxruntime_onnx'"]
