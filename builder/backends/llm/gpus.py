"""The GPUs a recipe may target (`gpu:`, for the memory plan and the quantization rules of every LLM
runtime): their memory as nvidia-smi reports it and their CUDA compute capability."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

# Total device memory in MiB as nvidia-smi reports it (H200: 143,771 MiB, measured on the lent H200;
# the others as these boards report it). Marketing "141 GB" / "48 GB" are decimal gigabytes and
# over-state it.
GPU_MEMORY_MIB = {
    "H200": 143771,
    "H100": 81559,
    "A100-80": 81920,
    "A100-40": 40960,
    "L40S": 46068,
    "L4": 23034,
    "A10G": 23028,
    "T4": 15360,
    "B200": 183359,
}
GPU_MEMORY_GIB = {k: round(v / 1024, 1) for k, v in GPU_MEMORY_MIB.items()}
# (B200: 179 GiB as nvidia-smi's memory.total on HGX B200.)
# CUDA compute capability: FP8 needs SM 8.9+ (Ada, Hopper, Blackwell), bfloat16 SM 8.0+
# (TensorRT-LLM support matrix)
GPU_SM = {
    "H200": 9.0,
    "H100": 9.0,
    "A100-80": 8.0,
    "A100-40": 8.0,
    "L40S": 8.9,
    "L4": 8.9,
    "A10G": 8.6,
    "T4": 7.5,
    "B200": 10.0,
}


def _known_gpu(name: str) -> str:
    if name not in GPU_MEMORY_GIB:
        raise ValueError(f"unknown GPU {name!r}; known: {', '.join(GPU_MEMORY_GIB)}")
    return name


# The GPU a memory plan is made for (LLM and vLLM recipes).
TargetGPU = Annotated[
    str,
    AfterValidator(_known_gpu),
    Field(description=f"Target GPU for the memory plan: {', '.join(GPU_MEMORY_GIB)}."),
]
