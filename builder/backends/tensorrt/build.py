"""Subprocess entry: ONNX → TensorRT plan with TensorRT's Python API. `python -m ... SPEC_JSON`."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(spec_path: str) -> int:
    import tensorrt as trt

    spec = json.loads(Path(spec_path).read_text())
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    with open(spec["onnx"], "rb") as f:
        if not parser.parse(f.read()):
            for i in range(parser.num_errors):
                print(parser.get_error(i), file=sys.stderr)
            return 2
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, spec["workspace_bytes"])
    config.builder_optimization_level = spec["builder_optimization_level"]
    if spec["fp16"]:
        config.set_flag(trt.BuilderFlag.FP16)
    if spec["int8"]:
        config.set_flag(trt.BuilderFlag.INT8)
    cache_path = Path(spec["timing_cache"])
    cache_bytes = cache_path.read_bytes() if cache_path.exists() else b""
    cache = config.create_timing_cache(cache_bytes)
    config.set_timing_cache(cache, ignore_mismatch=False)
    for profile_spec in spec["profiles"]:
        profile = builder.create_optimization_profile()
        for name, rng in profile_spec.items():
            profile.set_shape(name, rng["min"], rng["opt"], rng["max"])
        config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        print("TensorRT returned no engine", file=sys.stderr)
        return 3
    with open(spec["plan"], "wb") as f:
        f.write(plan)
    with open(spec["timing_cache"], "wb") as f:
        f.write(config.get_timing_cache().serialize())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
