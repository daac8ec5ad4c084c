"""Upstream release facts the builder reads, shipped as package data (builder/facts/*.json, installed as
tritonbuild/facts/): which NGC tritonserver image ships which TensorRT-LLM, TensorRT, CUDA and vLLM
(triton_images.json, Triton's Release Compatibility Matrix), which Python each image runs its Python
backend on (triton_image_pythons.json), and what each recorded vLLM takes (vllm_engine_args.json,
vllm_quantization.json, vllm_speculative.json, vllm_lora.json: derived from its wheel). Each file
records where it was read (repository, commit, path, lines) and the command that re-derives it;
tests/contracts checks them against upstream. The one reader of that data."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

FOLDER = "facts"


def _folder():
    return resources.files("tritonbuild").joinpath(FOLDER)


def names() -> list[str]:
    """Every fact file the package ships, by name (the file name without .json)."""
    return sorted(p.name[: -len(".json")] for p in _folder().iterdir() if p.name.endswith(".json"))


@cache
def load(name: str) -> dict:
    """One fact file, parsed; KeyError naming the shipped ones for any other name."""
    path = _folder().joinpath(f"{name}.json")
    if not path.is_file():
        raise KeyError(f"no fact file {name}.json in tritonbuild/{FOLDER}/ (it ships {names()})")
    return json.loads(path.read_text(encoding="utf-8"))
