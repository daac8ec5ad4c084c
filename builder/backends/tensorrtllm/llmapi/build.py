"""Subprocess entry: build a TensorRT engine with TensorRT-LLM's LLM API. `python -m ... SPEC_JSON`.

Uses the TensorRT-engine LLM class (the default LLM class is the PyTorch backend, which builds
nothing).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    try:
        from tensorrt_llm._tensorrt_engine import LLM
    except ImportError:  # older releases: the TRT engine LLM is the default
        from tensorrt_llm import LLM
    from tensorrt_llm.llmapi import BuildConfig, QuantAlgo, QuantConfig

    build_config = BuildConfig(**spec["build_config"])
    for key, value in spec["plugin_config"].items():
        setattr(build_config.plugin_config, key, value)
    quant = QuantConfig(
        quant_algo=getattr(QuantAlgo, spec["quant_algo"]) if spec["quant_algo"] else None,
        kv_cache_quant_algo=getattr(QuantAlgo, spec["kv_cache_quant_algo"])
        if spec["kv_cache_quant_algo"]
        else None,
    )
    llm = LLM(
        model=spec["model"],
        dtype=spec["dtype"],
        build_config=build_config,
        quant_config=quant,
        tensor_parallel_size=spec["tensor_parallel_size"],
        pipeline_parallel_size=spec["pipeline_parallel_size"],
    )
    try:
        llm.save(spec["engine_dir"])
    finally:
        llm.shutdown()
    print(f"engine saved to {spec['engine_dir']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
