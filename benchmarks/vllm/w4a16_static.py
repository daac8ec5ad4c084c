"""What the W4A16 kernel (or a variant of it, benchmarks/vllm/variants/) compiles to for Hopper, on a machine
without a GPU: per layer shape of Llama-3-8B, Triton's PTX for sm_90 run through the ptxas Triton ships, its
registers per thread, shared memory per program, how many programs one H100 SM holds at once (registers, shared
memory, threads), how many programs one row launches and so how many waves, and which memory instructions the PTX
uses (TMA copies, wgmma, plain global loads). Not a timing: a screen before a device call (issue 45), to see
whether a variant changes what it is meant to change.

    python3 benchmarks/vllm/w4a16_static.py                                   # the committed kernel
    python3 benchmarks/vllm/w4a16_static.py --plugin variant.py --setting W4A16_TMA=1 \
        --setting "W4A16_TMA=1 W4A16_STAGES=4" --out static.json

Each setting (environment variables the variant reads at import) runs in a process of its own. A variant whose
module sets `_TMA` true passes the weights as a tensor descriptor, and with `_TMA_X` the activations too
(variants/tma.patch). The compile gets what Triton's JIT specializes at such a launch (pointers 16-byte aligned,
integer arguments that are multiples of 16): without it no load is known aligned and the pipeliner stages none.
`--ttgir DIR` keeps each compile's Triton GPU IR, where a load the pipeliner staged shows as an async copy (cp.async
or TMA) issued iterations ahead, and one it did not as a load waited for in the loop.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    from benchmarks.vllm import w4a16_bench as bench
except ImportError:  # run as a script: its own folder is on the path
    import w4a16_bench as bench
# H100 SXM (compute capability 9.0): per SM 65,536 registers allocated per warp in units of 256, 228 KiB of
# shared memory of which each program also takes 1 KiB, 2,048 threads, 32 programs; 132 SMs
SM = {"registers": 65536, "register_unit": 256, "shared": 228 * 1024, "shared_per_program": 1024,
      "threads": 2048, "programs": 32, "sms": 132}  # fmt: skip
PTX_FEATURES = {
    "tma_copies": "cp.async.bulk.tensor",
    "mbarrier_waits": "mbarrier.try_wait",
    "async_copies": "cp.async.cg",
    "wgmma": "wgmma.mma_async",
    "mma_sync": "mma.sync",
    "global_loads": "ld.global",
    "shared_loads": "ld.shared",
    "ldmatrix": "ldmatrix",
    "barriers": "bar.sync",
}
# Triton GPU IR ops: a load its software pipeliner staged is an async copy (cp.async or TMA) issued for a later
# iteration; a plain tt.load in the loop is waited for in the iteration that issues it
TTGIR_OPS = {
    "plain_loads": "tt.load ",
    "async_copies": "ttg.async_copy_global_to_local",
    "tma_copies": "ttng.async_tma_copy_global_to_local",
    "barrier_waits": "ttng.wait_barrier",
}
POINTERS = {
    "x_ptr": "*fp16",
    "s_ptr": "*fp16",
    "y_ptr": "*fp16",
    "p_ptr": "*fp32",
    "lock_ptr": "*i32",
}
INTS = ["M", "N", "K_SLICE", "slice_size", "stride_xm", "stride_wn", "stride_ym"]


def programs_per_sm(registers: int, shared: int, warps: int) -> dict:
    """How many programs of `warps` warps one SM holds, by each limit, and the least of them."""
    per_warp = -(-registers * 32 // SM["register_unit"]) * SM["register_unit"]
    by = {
        "registers": SM["registers"] // per_warp // warps,
        "shared": SM["shared"] // (shared + SM["shared_per_program"]),
        "threads": SM["threads"] // (warps * 32),
    }
    return {"by": by, "programs": min(*by.values(), SM["programs"])}


def ptxas_registers(ptx: str) -> int:
    """Registers per thread that ptxas (Triton's own) gives the kernel for sm_90a."""
    import triton

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
    try:
        done = subprocess.run(
            [str(ptxas), "--gpu-name", "sm_90a", "-v", f.name, "-o", os.devnull],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        os.unlink(f.name)
    return int(re.search(r"Used (\d+) registers", done.stderr).group(1))


class _Aligned:
    """A tensor argument as Triton's specialization sees it: its data on an aligned address (torch's are)."""

    def data_ptr(self) -> int:
        return 0


def _attrs(fn, pointers: dict, n: int, k: int, split: int) -> dict:
    """What Triton's JIT specializes for a launch at this shape, by Triton's own rules (BaseBackend's
    get_tensor_specialization, get_int_specialization, parse_attr) and the kernel's own do_not_specialize: the
    pointers (not descriptors) and the integer arguments, at one row. Without it loads are not known to be
    aligned, cannot become async copies, and the pipeliner stages none."""
    from triton.backends.compiler import BaseBackend

    ints = {"M": 1, "N": n, "K_SLICE": k // split, "slice_size": n, "stride_xm": k, "stride_wn": k * 16,
            "stride_ym": n}  # fmt: skip
    attrs = {}
    for i, param in enumerate(fn.params):
        align = not param.do_not_specialize_on_alignment
        if param.do_not_specialize:
            continue
        if pointers.get(param.name, "").startswith("*"):
            key = BaseBackend.get_tensor_specialization(_Aligned(), align=align)
        elif param.name in ints:
            key = BaseBackend.get_int_specialization(ints[param.name], align=align)
        else:
            continue
        if attr := BaseBackend.parse_attr(key):
            attrs[(i,)] = attr
    return attrs


def compile_shape(
    plugin, n: int, k: int, group: int = 128, ttgir: Path | None = None, extra: dict | None = None
) -> dict:
    """The plugin's kernel for one layer shape, compiled for sm_90 (PDL on, as on Hopper). extra: a variant's
    own arguments, {"pointers": {name: type}, "constants": {name: value}} (the timeline's t_ptr, TIMELINE)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    bm, bn, bk, warps, stages, split = plugin.tiles_for(n, k, group)
    constants = {"GROUP": group, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT": split,
                 "ASM": True, "PDL": True}  # fmt: skip
    pointers = {"w_ptr": "*i16", **POINTERS}
    if getattr(plugin, "_TMA", False):
        constants["TMA"] = True
        pointers["w_ptr"] = f"tensordesc<i16[{max(bn // 64, 1)}, {min(bn, 64)}, 32]>"
        if getattr(plugin, "_TMA_X", False):
            constants["TMA_X"] = True
            pointers["x_ptr"] = f"tensordesc<fp16[{bm}, 32]>"
    pointers.update((extra or {}).get("pointers", {}))
    constants.update((extra or {}).get("constants", {}))
    signature = {**pointers, **dict.fromkeys(INTS, "i32")}
    signature = {**signature, **dict.fromkeys(constants, "constexpr")}
    fn = plugin._kernels()
    source = ASTSource(
        fn=fn, signature=signature, constexprs=constants, attrs=_attrs(fn, pointers, n, k, split)
    )
    options = {"num_warps": warps, "num_stages": stages, "launch_pdl": True}
    kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
    ptx, ir = kernel.asm["ptx"], kernel.asm["ttgir"]
    if ttgir:
        ttgir.mkdir(parents=True, exist_ok=True)
        (ttgir / f"{n}x{k}.ttgir").write_text(ir)
    registers, shared = ptxas_registers(ptx), kernel.metadata.shared
    resident = programs_per_sm(registers, shared, warps)
    programs = -(-n // bn) * split  # one row: one row tile
    return {
        "tiles": [bm, bn, bk, warps, stages, split],
        "registers": registers,
        "shared_bytes": shared,
        "programs_per_sm": resident["programs"],
        "programs_per_sm_by": resident["by"],
        "programs_at_1_row": programs,
        "waves_at_1_row": round(programs / (SM["sms"] * resident["programs"]), 3),
        "ptx": {name: ptx.count(text) for name, text in PTX_FEATURES.items()},
        "ttgir": {name: ir.count(text) for name, text in TTGIR_OPS.items()},
    }


def one(plugin_path: Path, shapes: list[tuple[int, int]], ttgir: Path | None = None) -> dict:
    plugin = bench.load_plugin(plugin_path, "static_plugin")
    return {
        f"{n}x{k}": compile_shape(plugin, n, k, ttgir=ttgir)
        for n, k in shapes or list(plugin.TILES)
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plugin", type=Path, default=bench.PLUGIN, help="the plugin or variant file")
    ap.add_argument(
        "--setting", action="append", default=[], help="environment variables, e.g. 'A=1 B=2'"
    )
    ap.add_argument(
        "--shape", action="append", default=[], help="NxK (default: the plugin's TILES)"
    )
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--ttgir", type=Path, help="a folder: each compile's Triton GPU IR, per setting"
    )
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shape]
    if args.one:
        print(json.dumps(one(args.plugin, shapes, args.ttgir)))
        return 0
    result = {"plugin": str(args.plugin), "sm": SM, "settings": {}}
    for setting in args.setting or [""]:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env.update(item.split("=", 1) for item in shlex.split(setting))
        cmd = [sys.executable, __file__, "--one", "--plugin", str(args.plugin)]
        cmd += [f"--shape={s}" for s in args.shape]
        if args.ttgir:
            cmd += [
                "--ttgir",
                str(args.ttgir / (setting.replace(" ", "_").replace("/", "_") or "default")),
            ]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode:
            print(done.stderr[-3000:], file=sys.stderr)
            return done.returncode
        result["settings"][setting] = json.loads(done.stdout.strip().splitlines()[-1])
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
