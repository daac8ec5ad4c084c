"""benchmarks/vllm/w4a16_static.py's occupancy arithmetic (the compile itself runs by hand: it takes minutes)."""

from __future__ import annotations

import pytest

from benchmarks.vllm import w4a16_static as static


def test_registers_are_allocated_per_warp_in_units_of_256():
    # 153 registers: 4,896 per warp, allocated as 5,120: 12 warps of 65,536, three programs of 4 warps
    assert static.programs_per_sm(153, 4096, 4)["by"]["registers"] == 3
    # 95: 3,040 → 3,072 a warp, 21 warps, five programs
    assert static.programs_per_sm(95, 17440, 4)["by"]["registers"] == 5
    assert static.programs_per_sm(244, 8192, 4)["by"]["registers"] == 2


def test_the_least_limit_decides_and_each_program_takes_a_kib_of_shared_memory_more():
    # 113 KiB each: 113 + 1 twice is 228 KiB, exactly the SM's
    resident = static.programs_per_sm(32, 113 * 1024, 4)
    assert resident["by"]["shared"] == 2 and resident["programs"] == 2
    assert static.programs_per_sm(32, 114 * 1024, 4)["programs"] == 1
    # few registers, little memory: 2,048 threads of 8-warp programs bound it
    assert static.programs_per_sm(32, 0, 8) == {
        "by": {"registers": 8, "shared": 228, "threads": 8},
        "programs": 8,
    }


def test_the_compile_gets_the_launchs_alignment_as_the_jit_gives_it():
    """Without the JIT's tt.divisibility on the pointers and on the integers that are multiples of 16, no load is
    known aligned and Triton's pipeliner stages none: the compile then shows a kernel that is not the one that runs.
    M and slice_size are left unspecialized by the kernel itself (do_not_specialize), and a descriptor takes none."""
    pytest.importorskip("triton")
    from tritonbuild.backends.vllm.invariant import w4a16

    fn = w4a16._kernels()
    if not hasattr(
        fn, "params"
    ):  # Triton's interpreter on in this process (other test modules): the JIT's own
        from triton.runtime.jit import JITFunction

        fn = JITFunction(fn.fn, **fn.kwargs)

    def names(attrs):
        return {fn.arg_names[i] for (i,) in attrs}

    pointers = {"w_ptr": "*i16", **static.POINTERS}
    attrs = static._attrs(fn, pointers, 6144, 4096, 4)
    assert all(v == [["tt.divisibility", 16]] for v in attrs.values())
    assert names(attrs) == {*pointers, "N", "K_SLICE", "stride_xm", "stride_wn", "stride_ym"}
    # a slice of 1,000 inputs is no multiple of 16; a descriptor is no pointer
    pointers["w_ptr"] = "tensordesc<i16[1, 64, 32]>"
    assert names(static._attrs(fn, pointers, 6144, 4000, 4)) == {
        *(set(pointers) - {"w_ptr"}),
        "N",
        "stride_xm",
        "stride_wn",
        "stride_ym",
    }
