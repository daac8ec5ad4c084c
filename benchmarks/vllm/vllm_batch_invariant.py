"""vLLM 0.22.0's batch-invariant linear (vllm/model_executor/layers/batch_invariant.py, the file from the wheel) run
without vLLM installed: what linear16_bench.py times the project's fp16 kernel against.

    unzip -p vllm-0.22.0-cp38-abi3-manylinux_2_28_x86_64.whl vllm/model_executor/layers/batch_invariant.py > bi.py
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import torch


def load_vllm_batch_invariant(path: Path, sms: int | None = None, smem: int | None = None):
    """vLLM 0.22.0's vllm/model_executor/layers/batch_invariant.py (the file, from the wheel) imported without vLLM:
    the six names it imports from vLLM (batch_invariant.py:10-15) stood in by what they return on CUDA (vllm.envs,
    current_platform's capability family and SM count, platforms/cuda.py:566-567; vllm.triton_utils' triton and tl;
    the opt-in shared memory per block, utils/mem_utils.py:32-40; a torch version test), installed in sys.modules
    only while the file is executed. Its FP16 column tile is set as enable_batch_invariant_mode sets it (:932: 256
    where a block may take more than 106,496 bytes of shared memory, else 128); the mode itself (aten overrides) is
    not enabled. sms / smem: for a machine without CUDA (the interpreter)."""
    import triton
    import triton.language as tl

    def props():
        return torch.cuda.get_device_properties(torch.cuda.current_device())

    def n_sms(device_id=0):
        return sms if sms is not None else props().multi_processor_count

    def max_smem(gpu=0):
        return smem if smem is not None else props().shared_memory_per_block_optin

    def newer(target: str) -> bool:
        return tuple(map(int, torch.__version__.split("+")[0].split(".")[:2])) >= tuple(
            map(int, target.split(".")[:2])
        )

    def capability_family(capability: int, device_id: int = 0) -> bool:
        major, minor = torch.cuda.get_device_capability() if torch.cuda.is_available() else (0, 0)
        return (major * 10 + minor) // 10 == capability // 10

    platform = types.SimpleNamespace(
        is_cuda=lambda: True, is_device_capability_family=capability_family, num_compute_units=n_sms
    )
    stubs = {
        "vllm": types.ModuleType("vllm"),
        "vllm.envs": types.SimpleNamespace(VLLM_BATCH_INVARIANT=True),
        "vllm.platforms": types.SimpleNamespace(current_platform=platform),
        "vllm.triton_utils": types.SimpleNamespace(triton=triton, tl=tl),
        "vllm.utils": types.ModuleType("vllm.utils"),
        "vllm.utils.mem_utils": types.SimpleNamespace(get_max_shared_memory_bytes=max_smem),
        "vllm.utils.platform_utils": types.SimpleNamespace(num_compute_units=n_sms),
        "vllm.utils.torch_utils": types.SimpleNamespace(is_torch_equal_or_newer=newer),
    }
    saved = {name: sys.modules.get(name) for name in stubs}
    sys.modules.update(stubs)
    stubs["vllm"].envs = stubs["vllm.envs"]
    try:
        spec = importlib.util.spec_from_file_location("vllm_0_22_batch_invariant", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    module._fp16_block_size_n = 256 if max_smem() > 106496 else 128
    return module
