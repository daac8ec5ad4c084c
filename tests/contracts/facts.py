"""Recorded upstream facts (facts/*.json), each with its source; see README.md for how they were read."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

FACTS = Path(__file__).parent / "facts"


@cache
def load(name: str) -> dict:
    return json.loads((FACTS / f"{name}.json").read_text())


def template(model: str) -> dict:
    """One upstream inflight_batcher_llm / llmapi template: {'inputs': [...], 'outputs': [...], 'parameters'}."""
    return load("tensorrtllm_backend")["templates"]["models"][model]


def script_for(model_type: str) -> tuple[str, dict]:
    for name, s in load("trtllm_scripts")["scripts"].items():
        if model_type in s["model_types"]:
            return name, s
    raise KeyError(model_type)
