"""facts/vllm_plugin.json against the vLLM 0.22.0 wheel it was read from (where the wheel is on disk): every fact's
line of text is in the file at the lines it names. The plugin's hooks (the W4A16 kernel registry, the unquantized
linears' linear_batch_invariant) rest on these lines."""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import pytest

from tests.contracts.facts import load

WHEEL = Path(os.environ.get("WHEEL_CACHE", Path.home() / ".cache" / "tritonbuild-gpu-wheels")) / (
    "vllm-0.22.0-cp38-abi3-manylinux_2_28_x86_64.whl"
)


def _facts():
    facts = load("vllm_plugin")
    return [
        (entry, fact)
        for entry, value in facts.items()
        if isinstance(value, dict)
        for fact in value.get("facts", [])
        if "where" in fact and "text" in fact
    ]


def test_the_unquantized_linear_hook_is_recorded_with_its_lines():
    facts = [fact for entry, fact in _facts() if entry == "unquantized_linear"]
    wheres = {fact["where"].split(":")[0] for fact in facts}
    assert "vllm/model_executor/layers/linear.py" in wheres
    assert "vllm/model_executor/layers/batch_invariant.py" in wheres


@pytest.mark.skipif(not WHEEL.is_file(), reason=f"the vLLM 0.22.0 wheel is not at {WHEEL}")
def test_every_fact_is_at_its_lines_in_the_wheel():
    source = load("vllm_plugin")["source"]
    assert hashlib.sha256(WHEEL.read_bytes()).hexdigest() == source["wheel_sha256"]
    missing = []
    with zipfile.ZipFile(WHEEL) as z:
        for entry, fact in _facts():
            path, _, lines = fact["where"].partition(":")
            first, _, last = lines.partition("-")
            text = z.read(path).decode().splitlines()[int(first) - 1 : int(last or first)]
            if not any(fact["text"] in line for line in text):
                missing.append(f"{entry}: {fact['where']}: {fact['text']}")
    assert not missing, missing
