"""The invariance table (builder/backends/vllm/invariant/table.py) cites upstream facts, not our own literals:
every vLLM cite is recorded in facts/vllm_invariance.json (re-derived from the vLLM 0.22.0 wheel and sdist where
they are on disk), and the plugin facts a row rests on (its minimum capability, what its can_implement refuses) are
read from the plugin's source at the cited lines."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from tests.contracts import vllm_invariance_facts as derive
from tritonbuild.backends.vllm.invariant import table

ROOT = Path(__file__).resolve().parents[2]
WHEEL = Path(os.environ.get("WHEEL_CACHE", Path.home() / ".cache" / "tritonbuild-gpu-wheels")) / (
    "vllm-0.22.0-cp38-abi3-manylinux_2_28_x86_64.whl"
)
SDIST = os.environ.get("TRITONBUILD_VLLM_SDIST")  # the unpacked vllm-0.22.0 sdist
TORCH_WHEEL = WHEEL.with_name("torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl")


def _facts() -> list[dict]:
    return json.loads(derive.FACTS.read_text())["facts"]


def test_every_vllm_cite_of_the_table_is_a_recorded_fact():
    recorded = {f["cite"]: f for f in _facts()}
    cites = derive.vllm_cites(table.ROWS)
    assert cites and set(cites) == set(recorded), set(cites) ^ set(recorded)
    for cite in cites:
        kind, path, first, last = derive.split(cite)
        where = f"{path}:{first}" + (f"-{last}" if last != first else "")
        assert (recorded[cite]["from"], recorded[cite]["where"]) == (kind, where)
        assert re.fullmatch(r"[0-9a-f]{64}", recorded[cite]["file_sha256"])


def test_every_row_cites_something_and_says_why_and_how_to_fix():
    verdicts = {"refuse", table.UNMEASURED, "force safe", "allow (measured)"}
    for row in table.ROWS:
        assert row.verdict in verdicts and row.cites and row.why, row.id
        assert row.fix or not row.verdict.startswith("refuse"), row.id
        for cite in row.cites:
            path = cite.split(" ")[-1].split(":")[0]
            assert (
                cite.startswith((derive.WHEEL_PREFIX, derive.TORCH_PREFIX))
                or (ROOT / path).is_file()
            ), cite
        if row.verdict == "allow (measured)":
            assert table.RECORD in row.cites, row.id  # allowed only where a GPU record shows it


@pytest.mark.skipif(not WHEEL.is_file(), reason=f"the vLLM 0.22.0 wheel is not at {WHEEL}")
def test_the_wheel_facts_are_what_the_wheel_says():
    got = {
        f["cite"]: f for f in derive.derive(WHEEL, Path(SDIST or "/nonexistent"), table.ROWS, True)
    }
    for fact in _facts():
        if fact["from"] == "wheel":
            assert got[fact["cite"]] == fact
    wheel_sha = hashlib.sha256(WHEEL.read_bytes()).hexdigest()
    assert wheel_sha == json.loads(derive.FACTS.read_text())["source"]["wheel_sha256"]


@pytest.mark.skipif(
    not SDIST, reason="TRITONBUILD_VLLM_SDIST (the unpacked vllm-0.22.0 sdist) is not set"
)
def test_the_sdist_facts_are_what_the_sdist_says():
    for fact in _facts():
        if fact["from"] == "sdist":
            data = (Path(SDIST) / fact["where"].split(":")[0]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == fact["file_sha256"], fact["cite"]


def _plugin_lines(cite: str) -> str:
    path, _, lines = cite.partition(":")
    first, _, last = lines.partition("-")
    rows = (ROOT / path).read_text().splitlines()
    return "\n".join(rows[int(first) - 1 : int(last or first)])


def _method(name: str) -> ast.FunctionDef:
    tree = ast.parse((ROOT / table.PLUGIN).read_text())
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def test_the_plugins_minimum_capability_is_the_tables():
    cite = next(c for c in table.BY_ID["gpu_below_sm80"].cites if c.startswith(table.PLUGIN))
    text = _plugin_lines(cite)
    assert "def get_min_capability" in text
    returned = _method("get_min_capability").body[-1].value.value
    assert f"return {returned}" in text and returned == round(table.PLUGIN_MIN_SM * 10)


def test_the_layer_shapes_the_kernel_refuses_are_the_tables():
    cite = next(c for c in table.BY_ID["int4_layer_shape"].cites if c.startswith(table.KERNEL))
    text = _plugin_lines(cite)
    assert "def supported" in text and "LAYOUT_K" in text and "group % 32" in text


def test_what_the_plugins_can_implement_refuses_is_what_the_table_refuses():
    cite = next(c for c in table.BY_ID["checkpoint_quantized"].cites if c.startswith(table.PLUGIN))
    text = _plugin_lines(cite)
    assert "def can_implement" in text
    for needs in ("uint4b8", "zero_points", "has_g_idx", "torch.float16, torch.bfloat16"):
        assert needs in text, needs


COMBO_CITE = derive.WHEEL_PREFIX + "vllm/config/compilation.py:957-967"


def test_the_inductor_options_forced_off_are_the_ones_vllm_turns_on_unless_given():
    """Row combo_kernels: vLLM 0.22 sets both options True unless either is in inductor_compile_config; model.json
    gives both false. The keys are vLLM's, read from the wheel where it is on disk."""
    row = table.BY_ID["combo_kernels"]
    assert COMBO_CITE in row.cites and table.COMPILE_RECORD in row.cites
    assert set(table.INDUCTOR_FORCED.values()) == {False}
    fact = next(f for f in _facts() if f["cite"] == COMBO_CITE)
    assert any(
        f'"{key}" not in self.inductor_compile_config' in fact["text"]
        for key in table.INDUCTOR_FORCED
    )
    if not WHEEL.is_file():
        pytest.skip(f"the vLLM 0.22.0 wheel is not at {WHEEL}")
    import zipfile

    _, path, first, last = derive.split(COMBO_CITE)
    lines = zipfile.ZipFile(WHEEL).read(path).decode().splitlines()[first - 1 : last]
    text = "\n".join(lines)
    for key in table.INDUCTOR_FORCED:
        assert f'"{key}" not in self.inductor_compile_config' in text, key
        assert f'self.inductor_compile_config["{key}"] = True' in text, key
    assert "not current_platform.is_cpu()" in text  # on a GPU only: no CPU test can see it


def test_every_torch_cite_of_the_table_is_a_recorded_fact_of_the_torch_vllm_runs_on():
    """Rows inductor_deterministic*: Inductor as vLLM 0.22's serving image runs it (torch 2.11.0+cu130, the GPU runs'),
    recorded from that release's wheel; re-derived where the wheel is on disk."""
    doc = json.loads(derive.FACTS.read_text())
    recorded = {f["cite"]: f for f in doc["torch_facts"]}
    cites = derive.torch_cites(table.ROWS)
    assert cites and set(cites) == set(recorded), set(cites) ^ set(recorded)
    assert (
        doc["torch_source"]["version"] == "2.11.0+cu130"
        and len(doc["torch_source"]["commit"]) == 40
    )
    if not TORCH_WHEEL.is_file():
        pytest.skip(f"the torch 2.11.0 wheel is not at {TORCH_WHEEL}")
    assert derive.derive_torch(TORCH_WHEEL, table.ROWS) == doc["torch_facts"]
    assert (
        hashlib.sha256(TORCH_WHEEL.read_bytes()).hexdigest() == doc["torch_source"]["wheel_sha256"]
    )


def test_the_inductor_option_forced_on_is_inductors_deterministic_mode():
    """Row inductor_deterministic: model.json's key is Inductor's own config name (torch 2.11.0 _inductor/config.py),
    the one codegen copies into every generated kernel's meta and the runtime filter reads."""
    assert table.INDUCTOR_DETERMINISTIC == {"deterministic": True}
    facts = {f["where"]: f["text"] for f in json.loads(derive.FACTS.read_text())["torch_facts"]}
    assert (
        facts["torch/_inductor/codegen/triton.py:5298"] == '"deterministic": config.deterministic,'
    )
    assert "len(configs) == 1" in facts["torch/_inductor/runtime/triton_heuristics.py:3370-3376"]
    if not TORCH_WHEEL.is_file():
        pytest.skip(f"the torch 2.11.0 wheel is not at {TORCH_WHEEL}")
    import zipfile

    source = zipfile.ZipFile(TORCH_WHEEL).read("torch/_inductor/config.py").decode().splitlines()
    assert source[853] == 'deterministic = os.getenv("TORCHINDUCTOR_DETERMINISTIC") == "1"'
    heuristics = (
        zipfile.ZipFile(TORCH_WHEEL).read("torch/_inductor/runtime/triton_heuristics.py").decode()
    )
    assert 'inductor_meta.get("deterministic", False)' in "\n".join(
        heuristics.splitlines()[3369:3376]
    )
