"""One LLM layer under the runtimes: what TensorRT-LLM and vLLM share lives in backends/llm/, which imports no
runtime, and no runtime's module imports another runtime (at the top or inside a function), so adding an LLM runtime
means new modules over llm/ and a row in RUNTIMES, not one runtime reaching into another."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

BACKENDS = ROOT / "builder" / "backends"
# runtime: (its modules, the module prefixes that are its); a new LLM runtime adds its row
RUNTIMES = {
    "tensorrtllm": (
        sorted(p for p in (BACKENDS / "tensorrtllm").rglob("*.py") if p.parent.name != "models"),
        ("tritonbuild.backends.tensorrtllm",),
    ),
    "vllm": (sorted((BACKENDS / "vllm").rglob("*.py")), ("tritonbuild.backends.vllm",)),
}
VLLM_MODULES = RUNTIMES["vllm"][0]
LLM_MODULES = sorted((BACKENDS / "llm").glob("*.py"))
TENSORRTLLM = RUNTIMES["tensorrtllm"][1]
EVERY_RUNTIME = tuple(prefix for _, prefixes in RUNTIMES.values() for prefix in prefixes)


def _package(path: Path) -> str:
    parts = path.relative_to(ROOT / "builder").with_suffix("").parts
    return ".".join(["tritonbuild", *parts[:-1]])


def _imported(source: str, package: str) -> set[str]:
    """Every module (or module.name) the source imports, anywhere in it; package: the importing module's package,
    for relative imports."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            found |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
    return found


def _from(source: str, package: str, prefixes: tuple[str, ...]) -> list[str]:
    return sorted(name for name in _imported(source, package) if name.startswith(prefixes))


@pytest.mark.parametrize("path", VLLM_MODULES, ids=lambda p: p.relative_to(BACKENDS).as_posix())
def test_a_vllm_module_imports_nothing_of_tensorrtllm(path: Path):
    found = _from(path.read_text(), _package(path), TENSORRTLLM)
    assert not found, f"{path.name} imports {found}: move what both runtimes use into backends/llm/"


@pytest.mark.parametrize(
    ("runtime", "path"),
    [(r, p) for r, (paths, _) in RUNTIMES.items() for p in paths],
    ids=lambda x: x if isinstance(x, str) else x.relative_to(BACKENDS).as_posix(),
)
def test_no_runtime_imports_another(runtime: str, path: Path):
    others = tuple(
        prefix for name, (_, prefixes) in RUNTIMES.items() if name != runtime for prefix in prefixes
    )
    found = _from(path.read_text(), _package(path), others)
    assert not found, (
        f"{runtime}'s {path.name} imports {found}: move what both runtimes use into backends/llm/"
    )


@pytest.mark.parametrize("path", LLM_MODULES, ids=lambda p: p.name)
def test_the_llm_layer_imports_no_runtime(path: Path):
    found = _from(path.read_text(), _package(path), EVERY_RUNTIME)
    assert not found, f"llm/{path.name} imports {found}: the shared layer sits below every runtime"


def test_the_checks_see_the_modules_and_a_bad_import():
    """Guards against vacuous passes: the vLLM modules are found, and each way of importing tensorrtllm/ (top level,
    inside a function, the package by name, relative) is caught."""
    assert {p.relative_to(BACKENDS).as_posix() for p in VLLM_MODULES} >= {
        "vllm/backend.py",
        "vllm/versions.py",
        "vllm/speculative.py",
        "vllm/quantize/step.py",
        "vllm/invariant/wheel.py",
    }
    assert {p.name for p in LLM_MODULES} >= {"checkpoint.py", "memory.py", "gpus.py", "images.py"}
    assert {p.relative_to(BACKENDS).as_posix() for p in RUNTIMES["tensorrtllm"][0]} >= {
        "tensorrtllm/__init__.py",
        "tensorrtllm/memory.py",
        "tensorrtllm/recipe/model.py",
        "tensorrtllm/llmapi/emit.py",
        "tensorrtllm/checks/load.py",
    }
    assert _package(BACKENDS / "llm" / "memory.py") == "tritonbuild.backends.llm"
    bad = [
        "from tritonbuild.backends.tensorrtllm.memory import Architecture",
        "def f():\n    from tritonbuild.backends.tensorrtllm import read_checkpoint",
        "from tritonbuild.backends import tensorrtllm",
        "import tritonbuild.backends.tensorrtllm.images",
        "from .tensorrtllm import recipe",
    ]
    for source in bad:
        assert _from(source, "tritonbuild.backends", TENSORRTLLM), source
    assert (
        _from(
            "from tritonbuild.backends.llm.memory import Architecture",
            "tritonbuild.backends",
            TENSORRTLLM,
        )
        == []
    )
    assert _from("from .. import vllm", "tritonbuild.backends.llm", EVERY_RUNTIME)


def test_the_shared_16_bit_weights_are_tensorrtllm_s_unquantized_ones():
    """vLLM's plan prices weights with llm.memory's default (16-bit); TensorRT-LLM's 'none' format is the same."""
    from tritonbuild.backends.llm.memory import Architecture, model_weight_bytes
    from tritonbuild.backends.tensorrtllm.memory import weight_bytes

    arch = Architecture.from_hf_config(
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "vocab_size": 32000,
        }
    )
    assert model_weight_bytes(arch) == weight_bytes(arch, "none")
