"""Recorded upstream facts, each with its source; see README.md for how they were read. The facts the builder
reads ship with it (builder/facts/*.json, read by tritonbuild.core.facts); the rest, which only tests check
against, stay here (facts/*.json). load() reads either by name."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

FACTS = Path(__file__).parent / "facts"
PACKAGE_FACTS = Path(__file__).resolve().parents[2] / "builder" / "facts"


def paths() -> list[Path]:
    """Every recorded fact file: the package's and the tests' own."""
    return sorted([*PACKAGE_FACTS.glob("*.json"), *FACTS.glob("*.json")], key=lambda p: p.name)


def path(name: str) -> Path:
    """Where the fact file of that name lives (the package's, else the tests')."""
    shipped = PACKAGE_FACTS / f"{name}.json"
    return shipped if shipped.is_file() else FACTS / f"{name}.json"


@cache
def load(name: str) -> dict:
    return json.loads(path(name).read_text())


def template(model: str) -> dict:
    """One upstream inflight_batcher_llm / llmapi template: {'inputs': [...], 'outputs': [...], 'parameters'}: the
    recorded commit's, with the tensors TensorRT-LLM 1.x adds."""
    templates = load("tensorrtllm_backend")["templates"]
    base, extra = templates["models"][model], templates["additions_1x"]["models"].get(model, {})
    return {**base, **{k: base[k] + extra.get(k, []) for k in ("inputs", "outputs")}}


def script_for(model_type: str) -> tuple[str, dict]:
    for name, s in load("trtllm_scripts")["scripts"].items():
        if model_type in s["model_types"]:
            return name, s
    raise KeyError(model_type)


def vllm_versions() -> dict[str, dict]:
    """The vLLM versions whose AsyncEngineArgs are recorded: version → {source, images, AsyncEngineArgs, ...}."""
    return load("vllm_engine_args")["versions"]


def vllm_of_image(triton_image: str) -> str:
    """The vLLM an NGC tritonserver:<tag>-vllm-python-py3 image ships (Triton's compatibility matrix)."""
    tag = triton_image.rsplit(":", 1)[1].split("-", 1)[0]
    return load("triton_images")["vllm_images"][tag]["vllm"]


def engine_args_of_image(triton_image: str) -> set[str]:
    """AsyncEngineArgs of the vLLM that image ships; KeyError when that version is not recorded."""
    return set(vllm_versions()[vllm_of_image(triton_image)]["AsyncEngineArgs"])
