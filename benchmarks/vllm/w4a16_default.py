"""vLLM's default W4A16 kernel on Hopper (Machete), driven the way vLLM 0.22.0 drives it, for the kernel record's
int4_default_ms column (issue 45: the invariant kernel against what a default configuration serves with).

Facts from vllm 0.22.0's wheel, vllm/model_executor/kernels/linear/mixed_precision/machete.py (MacheteLinearKernel):
- the weights are int32 words packed along K, seen as [K/8, N] (input_dim 0, output_dim 1, packed_dim 0), laid out
  column-major (`x.data.t().contiguous().t()`) and repacked by `ops.machete_prepack_B(..., a_type=act dtype,
  b_type=weight type, group_scales_type=act dtype)` (lines 96-101); a [N, K/8] row-major tensor transposed is that
  layout already;
- the scales are [K/G, N], contiguous (lines 104-108);
- `ops.machete_mm(a=x, b_q=..., b_type=..., b_group_zeros=None for symmetric weights, b_group_scales=...,
  b_group_size=G)` (lines 147-154).
The word packing is vLLM's pack_quantized_values_into_int32 (quant_utils.py:421-440: element 8w+i of the packed
dimension in bits 4i.. of word w), the same as w4a16_bench.random_layer's; symmetric 4-bit compressed-tensors weights
are `scalar_types.uint4b8` (compressed_tensors_wNa16.py:35, WNA16_SUPPORTED_TYPES_MAP): q + 8 stored unsigned, as
random_layer stores them.
"""

from __future__ import annotations

import torch


class Machete:
    """vLLM's Machete W4A16 GEMM: prepare once per layer, then matmul per call."""

    def __init__(self, ops, weight_type):
        self.ops = ops
        self.weight_type = weight_type

    def prepare(self, packed: torch.Tensor, scale: torch.Tensor):
        """packed: [N, K/8] int32 (random_layer's), scale: [N, K/G] fp16 -> (Machete's weights, its scales)."""
        weights = self.ops.machete_prepack_B(
            packed.t(),
            a_type=torch.float16,
            b_type=self.weight_type,
            group_scales_type=torch.float16,
        )
        return weights, scale.t().contiguous()

    def matmul(self, x: torch.Tensor, weights, scales, group: int) -> torch.Tensor:
        return self.ops.machete_mm(
            a=x,
            b_q=weights,
            b_type=self.weight_type,
            b_group_zeros=None,
            b_group_scales=scales,
            b_group_size=group,
        )


def load() -> tuple[Machete | None, str | None]:
    """(the kernel, None) where vLLM's Machete runs here, else (None, why not)."""
    try:
        from vllm import _custom_ops as ops
        from vllm.scalar_type import scalar_types
    except Exception as e:  # noqa: BLE001 - any failure to import is the reason reported
        return None, (
            f"vLLM is not importable on this machine ({type(e).__name__}: {e}); "
            "its default W4A16 kernel not run"
        )
    if tuple(torch.cuda.get_device_capability()) != (9, 0):
        return None, "vLLM's Machete needs compute capability 9.0 (Hopper); this GPU is another"
    if not hasattr(torch.ops._C, "machete_mm"):
        return None, "this vLLM build has no Machete operations (torch.ops._C.machete_mm)"
    return Machete(ops, scalar_types.uint4b8), None
