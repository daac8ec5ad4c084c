"""The W4A16 kernel compiled for Hopper (sm_90) on this CPU machine by Triton's own compiler: the path the unit
tests' interpreter never takes. With programmatic dependent launch the kernel waits for the kernel ahead
(griddepcontrol.wait) before it reads anything; without, no such wait; the fp16 dequantization is the PTX one."""

from __future__ import annotations

import pytest

from tritonbuild.backends.vllm.invariant import plugin

triton = pytest.importorskip("triton")

SIGNATURE = {
    **dict.fromkeys(["x_ptr", "s_ptr", "y_ptr"], "*fp16"),
    "w_ptr": "*i16",
    "p_ptr": "*fp32",
    "lock_ptr": "*i32",
    **dict.fromkeys(
        ["M", "N", "K_SLICE", "slice_size", "stride_xm", "stride_wn", "stride_ym"], "i32"
    ),
}


def _ptx(pdl: bool) -> str:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    block_m, block_n, block_k, warps, stages, split = plugin.TILES[(4096, 4096)]
    constants = {"GROUP": 128, "BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k}
    constants.update({"SPLIT": split, "ASM": True, "PDL": pdl})
    signature = {**SIGNATURE, **dict.fromkeys(constants, "constexpr")}
    source = ASTSource(fn=plugin._kernels(), signature=signature, constexprs=constants)
    options = {"num_warps": warps, "num_stages": stages}
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options).asm["ptx"]


@pytest.mark.parametrize("pdl", [True, False])
def test_the_kernel_compiles_for_hopper_and_waits_for_the_kernel_ahead_only_with_pdl(pdl):
    ptx = _ptx(pdl)
    assert ("griddepcontrol.wait" in ptx) is pdl
    assert "sub.rn.f16x2" in ptx  # the PTX dequantization, not the interpreter's Triton operations
    if pdl:  # the wait comes before the first load from global memory
        assert ptx.index("griddepcontrol.wait") < ptx.index("ld.global")
