"""No stage names a backend: the stages ask the registry. Every string constant in their source that
equals a registered backend's name, Triton backend, platform or default model file fails here (past ALLOWED);
the names come from the registry itself, so a backend added later is covered too."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import ROOT
from tritonbuild.backends import REGISTRY

SOURCE = ROOT / "builder"
# The stages and triton/ (recipe/ has its own test; core/ is below them: its toolchain keys are distribution names).
STAGES = (
    "triton",
    "plan",
    "steps",
    "repository",
    "server",
    "verify",
    "publish",
    "tune",
    "api",
    "cli",
)
# file → (the words it may use, None = any; why). Ports of Triton's core name platforms themselves (Triton's
# words are the contract there), and Triton's Python backend is the runtime of our stand-in and null models.
ALLOWED = {
    "triton/rules.py": (
        None,
        "model_config_utils.cc GetBackendTypeFromPlatform and the "
        "default-backend guessing of GetNormalizedModelConfig",
    ),
    "triton/ensemble_rules.py": ({"ensemble"}, "ensemble_utils.cc: core's scheduler, no backend"),
    "triton/io_rules.py": (
        {"tensorrt_plan"},
        "model_config_utils.cc ValidateModelIOConfig: Triton's own rule allows shape tensors and "
        "non-linear I/O formats on that platform only",
    ),
    "triton/images.py": (
        {"python"},
        "facts/triton_image_pythons.json's key for the Python version an image runs, not a backend",
    ),
    "triton/standin.py": (
        {"python", "model.py", "ensemble"},
        "the stand-in is a Python-backend model "
        "(the embedded server has only that backend); ensembles are core's scheduler",
    ),
    "server/launcher.py": (
        {"python", "model.py"},
        "the embedded server's Python backend library and its stub, "
        "and Triton's rule for a Python-based backend's entry point (backends/<name>/model.py)",
    ),
    "server/toolenv.py": (
        {"python"},
        "the interpreter of the embedded server's own environment (bin/python, "
        "its record's python key), not a backend",
    ),
    "server/interpreters.py": (
        {"python"},
        "the interpreters the embedded server's environment is made from (pyenv's bin/python)",
    ),
    "server/envmake.py": (
        {"python"},
        "the made venv's bin/python and its record's python key, not a backend",
    ),
    "tune/probes.py": (
        {"python"},
        "the null model (the server's ceiling) is a Python-backend model",
    ),
    "tune/report.py": (
        {"python"},
        "the report's machine.python key: the interpreter's version, not a backend",
    ),
}


def _sources() -> list:
    paths = []
    for stage in STAGES:
        top = SOURCE / stage
        paths += [top] if top.suffix == ".py" else sorted(top.rglob("*.py"))
    return paths


def _backend_words() -> set[str]:
    words = set()
    for backend in REGISTRY.all():
        files = backend.model_files or {}
        words |= {backend.name, backend.triton_backend, *files, *files.values()}
    return words - {""}


def _named(source: str, label: str) -> list[str]:
    words = _backend_words()
    return [
        f"{label}:{node.lineno}: {node.value!r}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words
    ]


@pytest.mark.parametrize("path", _sources(), ids=lambda p: p.relative_to(SOURCE).as_posix())
def test_stage_names_no_backend(path):
    rel = path.relative_to(SOURCE).as_posix()
    allowed, _why = ALLOWED.get(rel, (set(), ""))
    hits = [
        hit
        for hit in _named(path.read_text(), rel)
        if allowed is not None and hit.split(": ", 1)[1][1:-1] not in allowed
    ]
    assert not hits, (
        f"{hits}: ask backends.REGISTRY (for_config, for_manifest, a Backend attribute) instead"
    )


@pytest.mark.parametrize("rel", sorted(ALLOWED))
def test_each_allowance_is_still_needed(rel):
    allowed, _why = ALLOWED[rel]
    used = {hit.split(": ", 1)[1][1:-1] for hit in _named((SOURCE / rel).read_text(), rel)}
    assert used and (allowed is None or used == allowed), (
        f"{rel} uses {sorted(used)}: narrow ALLOWED to that"
    )


def test_the_scan_sees_a_literal():
    """The check can fail: rules.py's old branches on a backend and a platform are found."""
    old = 'if backend == "tensorrtllm":\n    pass\nelif mc.platform == "onnxruntime_onnx":\n    pass\n'
    assert [hit.split(": ")[1] for hit in _named(old, "old")] == [
        "'tensorrtllm'",
        "'onnxruntime_onnx'",
    ]
