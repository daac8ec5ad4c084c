"""The W4A16 kernel and the fp16 linear compiled for Hopper (sm_90) on this CPU machine by Triton's own
compiler: the path the unit tests' interpreter never takes. With programmatic dependent launch a kernel waits
for the kernel ahead (griddepcontrol.wait) before it reads anything; without, no such wait; the W4A16 fp16
dequantization is the PTX one. Compiled in a process of its own: Triton's compiler and its interpreter (which
other test modules switch on) do not share a process cleanly."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

# NOTE: not imported here: the interpreter's test modules need TRITON_INTERPRET set before triton's first import
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="Triton is not installed"
)

COMPILE = r"""
import json
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from tritonbuild.backends.vllm.invariant import linear16, w4a16

POINTERS = {"p_ptr": "*fp32", "lock_ptr": "*i32"}
INTS = ["M", "N", "K_SLICE", "slice_size", "stride_xm", "stride_wn", "stride_ym"]


def compiled(kernel, pointers, ints, constants, warps, stages):
    # launch_pdl: the launch keyword the kernels pass on Hopper, a compile option Triton carries to its launcher
    signature = {**pointers, **POINTERS, **dict.fromkeys(ints, "i32"), **dict.fromkeys(constants, "constexpr")}
    source = ASTSource(fn=kernel, signature=signature, constexprs=constants)
    options = {"num_warps": warps, "num_stages": stages, "launch_pdl": constants["PDL"]}
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)


def facts(kernel):
    text = kernel.asm["ptx"]
    wait = "griddepcontrol.wait" in text
    first = wait and text.index("griddepcontrol.wait") < text.index("ld.global")
    return {"launch_pdl": kernel.metadata.launch_pdl, "wait": wait, "wait_first": first,
            "ptx_dequant": "sub.rn.f16x2" in text}


out = {}
for pdl in (True, False):
    bm, bn, bk, warps, stages, split = w4a16.TILES[(4096, 4096)]
    constants = {"GROUP": 128, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT": split, "ASM": True, "PDL": pdl}
    pointers = {"x_ptr": "*fp16", "w_ptr": "*i16", "s_ptr": "*fp16", "y_ptr": "*fp16"}
    out[f"w4a16 pdl={pdl}"] = facts(compiled(w4a16._kernels(), pointers, INTS, constants, warps, stages))
    bm, bn, bk, warps, stages, split = linear16.tiles_for(4096, 4096)
    constants = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT": split, "EVEN_K": True, "PDL": pdl}
    pointers = {"x_ptr": "*fp16", "w_ptr": "*fp16", "y_ptr": "*fp16"}
    ints = ["M", "N", "K", *INTS[1:]]
    out[f"linear16 pdl={pdl}"] = facts(compiled(linear16._kernel(), pointers, ints, constants, warps, stages))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def compiled() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", COMPILE], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kernel", ["w4a16", "linear16"])
@pytest.mark.parametrize("pdl", [True, False])
def test_the_kernel_compiles_for_hopper_and_waits_for_the_kernel_ahead_only_with_pdl(
    compiled, kernel, pdl
):
    facts = compiled[f"{kernel} pdl={pdl}"]
    assert facts["wait"] is pdl
    assert facts["wait_first"] is pdl  # the wait comes before the first load from global memory
    assert facts["launch_pdl"] is pdl  # what Triton's launcher reads to launch it so


def test_the_w4a16_kernel_dequantizes_in_ptx_on_the_gpu(compiled):
    assert compiled["w4a16 pdl=True"]["ptx_dequant"] and compiled["w4a16 pdl=False"]["ptx_dequant"]


class _Recorder:
    """Stands in for a Triton kernel: records the keywords of the launch it is given."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append(kwargs)


def test_without_pdl_the_launch_names_no_pdl_keyword(monkeypatch):
    """Off Hopper (here: the interpreter's CPU path) neither kernel is asked for PDL, and no launch carries the
    launch_pdl keyword, which a Triton older than the one vLLM 0.22 pins refuses."""
    torch = pytest.importorskip("torch")
    from tritonbuild.backends.vllm.invariant import linear16, w4a16

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    int4, fp16 = _Recorder(), _Recorder()
    monkeypatch.setattr(w4a16, "_kernels", lambda: int4)
    monkeypatch.setattr(w4a16, "_LAUNCH", None)
    monkeypatch.setattr(linear16, "_KERNEL", fp16)
    n, k = 64, 128
    weights, scales = (
        torch.zeros((n, k // 8), dtype=torch.int32),
        torch.ones((k // 128, n), dtype=torch.float16),
    )
    w4a16.w4a16_matmul(torch.ones((2, k), dtype=torch.float16), weights, scales, 128)
    linear16.linear16(
        torch.ones((2, k), dtype=torch.float16), torch.ones((n, k), dtype=torch.float16)
    )
    for launch in (*int4.launches, *fp16.launches):
        assert launch["PDL"] is False and "launch_pdl" not in launch
    assert len(int4.launches) == len(fp16.launches) == 1
