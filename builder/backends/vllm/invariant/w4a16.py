"""tritonbuild's batch-invariant W4A16 linear: y = x @ dequant(W).T for compressed-tensors'
pack-quantized INT4 weights (symmetric, groups of 32 or more), a row's bits a function of that row
and the layer alone (alone or amid 63 other requests, prefill or decode, eager or in a CUDA graph).

One Triton GEMM with tiles fixed per layer shape (never per row count), the K loop in one fixed
order, fp32 accumulation, a fixed split of K whose slices are added in slice order. The weights are
rearranged once (planes_order, at load by the plugin) into the order the kernel reads.

The vLLM plugin (plugin.py) serves vLLM's W4A16 layers with it; benchmarks/vllm/ and the unit tests
load this file alone, by path: it imports nothing of tritonbuild's, nor anything beside it.
"""

import os

# Tiles, chosen by the layer's shape (N, K) only: BLOCK_N weight columns (the MMA's left operand, in
# registers) by BLOCK_M rows (its narrow side) per program; SPLIT cuts K into that many fixed slices
# whose fp32 partial sums the tile's last program to finish adds in slice order. None of them
# depends on the row count M. K is read in steps of one layout block (LAYOUT_K, planes_order).
TILE_FIELDS = ("block_m", "block_n", "block_k", "warps", "stages", "split")
DEFAULT_TILES = (16, 64, 128, 4, 3, 1)
LAYOUT_K = 128
LAYOUT_N = 64
# Llama-3-8B's linears (qkv, o, gate_up, down; N x K): w4a16_bench.py's fastest at 1 row on an H100
# with 64 rows under 0.8x cuBLAS fp16's time (docs/runs/2026-12-06-w4a16-kernel-h100-planes.json)
TILES: dict[tuple[int, int], tuple[int, ...]] = {
    (6144, 4096): (16, 64, 256, 4, 3, 4),
    (4096, 4096): (16, 64, 256, 4, 3, 4),
    (28672, 4096): (32, 128, 128, 4, 3, 1),
    (4096, 14336): (16, 64, 256, 4, 3, 4),
}


def supported(k: int, group: int) -> str | None:
    """Why the kernel cannot take a layer of K inputs and this group size, or None."""
    if k % LAYOUT_K or group % 32 or k % group:
        return f"K {k} and group size {group} (needs K a multiple of {LAYOUT_K}, group of 32)"
    return None


def tiles_for(n: int, k: int, group: int) -> tuple[int, ...]:
    """The layer's tiles (TILE_FIELDS): a function of its shape alone, so every batch size runs the
    same reduction. SPLIT halved until each slice is whole layout blocks and whole groups; BLOCK_K
    (128 or 256) back to 128 where a slice is not whole steps of it."""
    tiles = list(TILES.get((n, k), DEFAULT_TILES))
    while tiles[5] > 1 and (k % tiles[5] or (k // tiles[5]) % max(group, LAYOUT_K)):
        tiles[5] //= 2
    if (k // tiles[5]) % tiles[2]:  # BLOCK_K: whole steps in a slice
        tiles[2] = LAYOUT_K
    return tuple(tiles)


def planes_order(words):
    """compressed-tensors' int32 words [N, K/8] (eight 4-bit values along K per word, low nibble
    first) as the kernel reads them: per row and LAYOUT_K block of K, 32 16-bit halves, half j
    holding K offsets j, 32 + j, 64 + j, 96 + j in its bits 0-3, 4-7, 8-11, 12-15 (plane i: offsets
    32i .. 32i + 31, one per half, in the MMA's K order); rows in blocks of LAYOUT_N, each block's
    halves of one K block contiguous (4 KiB, [N/64, K/128, 64, 32]): a step of the kernel reads whole
    blocks, not 64-byte pieces of 64 rows. N padded to LAYOUT_N with zero rows; int32 [N', K/8]."""
    import torch

    n, k = words.shape[0], words.shape[1] * 8
    padded = -(-n // LAYOUT_N) * LAYOUT_N
    shifts = torch.arange(8, device=words.device, dtype=torch.int32) * 4
    planes = (torch.arange(4, device=words.device, dtype=torch.int32) * 4)[:, None]
    out = torch.zeros((padded, k // LAYOUT_K, 32), dtype=torch.int16, device=words.device)
    for start in range(0, n, 2048):  # int32 nibbles of 2048 rows at a time (memory)
        chunk = words[start : start + 2048]
        q = ((chunk.int()[..., None] >> shifts) & 0xF).reshape(len(chunk), k // LAYOUT_K, 4, 32)
        halves = (q << planes).sum(2, dtype=torch.int32)
        out[start : start + len(chunk)] = torch.where(halves >= 2**15, halves - 2**16, halves)
    out = out.reshape(padded // LAYOUT_N, LAYOUT_N, k // LAYOUT_K, 32).transpose(1, 2)
    return out.contiguous().view(torch.int32).reshape(padded, k // 8)


def prepare_weights(weight_packed, weight_scale, group: int):
    """The layer's words [N, K/8] and scales [N, K/G] (compressed-tensors) as the kernel reads
    them: words in planes_order, scales [K/G, N]; contiguous. (group: unused, kept for callers)"""
    return planes_order(weight_packed), weight_scale.t().contiguous()


# The GEMM's Triton functions once _kernels() has run. NOTE: module globals, not closures: Triton's
# interpreter (TRITON_INTERPRET=1, the unit tests) runs a kernel's source in its module's globals.
_plane = None
_block = None
_finish = None


def _kernels():
    """The Triton kernel: the GEMM over one K slice per program, the slices added in the kernel."""
    import triton
    import triton.language as tl

    global _plane, _block, _finish
    _plane = _plane_function(triton, tl)
    _block = _block_function(triton, tl)
    _finish = _finish_function(triton, tl)
    return _gemm_kernel(triton, tl)


def _plane_function(triton, tl):
    """Plane i of a [BLOCK_N, 32] block of 16-bit halves (planes_order): q - 8 of its 32 K offsets
    in the activations' dtype, in registers, without a conversion instruction: q under a float's
    mantissa is 1024 + q (fp16: | 0x6400) or 128 + q (bf16), minus 1032 or 136 is q - 8; fp16 reads
    the second nibble of a byte in place, under the exponent of 64 (| 0x5400: 64 + q, minus 72).
    Only elementwise operations on the loaded halves: Triton loads them from shared memory straight
    into the MMA's register layout (no round trip of the dequantized tile through shared memory)."""

    @triton.jit
    def _plane(packed, i: tl.constexpr, dt: tl.constexpr, ASM: tl.constexpr):
        # fp16 on the GPU: the same values in PTX, two halves per 32-bit register (pack=2): one
        # shift for planes 2 and 3, one lop3 for mask and exponent ((a & b) | c), one subtraction
        if ASM and dt == tl.float16:
            return tl.inline_asm_elementwise(
                "{ .reg .b32 t, b; " + ("shr.b32 t, $1, 8; " if i >= 2 else "mov.b32 t, $1; ")
                + ("lop3.b32 t, t, 0x000F000F, 0x64006400, 0xEA; mov.b32 b, 0x64086408; "
                   if i % 2 == 0 else "lop3.b32 t, t, 0x00F000F0, 0x54005400, 0xEA; mov.b32 b, 0x54805480; ")
                + "sub.rn.f16x2 $0, t, b; }", "=r,r", [packed], dtype=tl.float16, is_pure=True, pack=2,
            )  # fmt: skip
        p = packed if i < 2 else packed >> 8
        if i % 2 == 0:
            if dt == tl.bfloat16:
                w = ((p & 0xF) | 0x4300).to(dt, bitcast=True) - 136.0
            else:
                w = ((p & 0xF) | 0x6400).to(dt, bitcast=True) - 1032.0
        elif dt == tl.bfloat16:
            w = (((p >> 4) & 0xF) | 0x4300).to(dt, bitcast=True) - 136.0
        else:
            w = ((p & 0xF0) | 0x5400).to(dt, bitcast=True) - 72.0
        return w

    return _plane


def _finish_function(triton, tl):
    """A program's tile (fp32 sums over its K slice; acc[n, m] of the [M, N] output) written:
    straight to y without a split; else to its slice of the fp32 partials p, and the tile's last
    program to finish (a per-tile counter) adds the SPLIT slices in slice order, writes y and sets
    the counter back to 0 (for the next call, a CUDA-graph replay included)."""

    @triton.jit
    def _finish(acc, y_ptr, p_ptr, lock_ptr, rows, cols, M, N, stride_ym, slice_size,
                SPLIT: tl.constexpr):  # fmt: skip
        offs = rows[None, :] * stride_ym + cols[:, None]
        mask = (rows < M)[None, :] & (cols < N)[:, None]
        if SPLIT == 1:
            tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=mask)
        else:
            tl.store(p_ptr + tl.program_id(2) * slice_size + offs, acc, mask=mask)
            lock = lock_ptr + tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
            tl.debug_barrier()  # every thread's partial stored before the counter moves
            if tl.atomic_add(lock, 1, sem="acq_rel") == SPLIT - 1:
                total = tl.load(p_ptr + offs, mask=mask, cache_modifier=".cg")
                if SPLIT * acc.numel <= 128 * 128:  # every slice's load in flight at once
                    for s in tl.static_range(1, SPLIT):
                        total += tl.load(p_ptr + s * slice_size + offs, mask=mask, cache_modifier=".cg")  # fmt: skip
                else:  # one slice at a time (registers)
                    for s in range(1, SPLIT):
                        total += tl.load(p_ptr + s * slice_size + offs, mask=mask, cache_modifier=".cg")  # fmt: skip
                tl.store(y_ptr + offs, total.to(y_ptr.dtype.element_ty), mask=mask)
                tl.atomic_xchg(lock, 0, sem="relaxed")  # read by a later launch: no fence needed

    return _finish


def _block_function(triton, tl):
    """One LAYOUT_K block of K for a tile: four planes of 32 K offsets, each one MMA chain; the
    group's sum times its scales (fp32) added to the tile when a quantization group ends (last:
    the scales of the block's last group, loaded ahead by the caller)."""

    @triton.jit
    def _block(acc, w_ptrs, x_ptrs, s_cols, last, k0, col_ok, row_ok, N, GROUP: tl.constexpr,
               ASM: tl.constexpr):  # fmt: skip
        dt: tl.constexpr = x_ptrs.dtype.element_ty
        packed = tl.load(w_ptrs, mask=col_ok[:, None], other=0).to(tl.uint16, bitcast=True)
        part = tl.zeros(acc.shape, dtype=tl.float32)
        for i in tl.static_range(4):
            x = tl.load(x_ptrs + 32 * i, mask=row_ok[None, :], other=0.0)
            part = tl.dot(_plane(packed, i, dt, ASM), x, part, out_dtype=tl.float32)
            if i == 3:  # the block ends (and its last group, or a part of a longer one)
                acc += part * last.to(tl.float32)[:, None]
            elif (32 * (i + 1)) % GROUP == 0:  # a group of 32 or 64 ends inside the block
                scale = tl.load(s_cols + ((k0 + 32 * i) // GROUP) * N, mask=col_ok, other=0.0)
                acc += part * scale.to(tl.float32)[:, None]
                part = tl.zeros(acc.shape, dtype=tl.float32)
        return acc

    return _block


def _gemm_kernel(triton, tl):
    """The W4A16 GEMM: acc[n, m] = W tile @ x tile.T, one [BLOCK_N, BLOCK_M] tile over one K slice
    per program, BLOCK_K (one or two LAYOUT_K blocks, _block) per step."""

    # NOTE: M (the row count) not specialized (Triton compiles another variant for an int equal to 1
    # or divisible by 16): one binary per layer shape, the same code for every row count
    @triton.jit(do_not_specialize=["M", "slice_size"])
    def _w4a16(x_ptr, w_ptr, s_ptr, y_ptr, p_ptr, lock_ptr, M, N, K_SLICE, slice_size, stride_xm,
        stride_wn, stride_ym, GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, SPLIT: tl.constexpr, ASM: tl.constexpr, PDL: tl.constexpr):  # fmt: skip
        if PDL:  # programmatic dependent launch: nothing read before the kernel ahead ends
            tl.extra.cuda.gdc_wait()
        # axis 0: row tiles (programs sharing a weight tile run together: L2); axis 2: K slice
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok, col_ok = rows < M, cols < N
        k_start, k_end = tl.program_id(2) * K_SLICE, (tl.program_id(2) + 1) * K_SLICE - 1
        # planes_order: [N / 64, K / 128, 64, 32] halves; stride_wn: one block of 64 rows
        block = (cols // 64) * stride_wn + (cols % 64) * 32 + (k_start // 128) * 2048
        w_ptrs = w_ptr + block[:, None] + tl.arange(0, 32)[None, :]
        x_ptrs = x_ptr + rows[None, :] * stride_xm + (k_start + tl.arange(0, 32))[:, None]
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
        # the scales of each block's last group loaded one step ahead (a load the pipeliner leaves
        # in the loop: too narrow for an async copy; waited for at its use, it stalls every step)
        s_cols = s_ptr + cols
        last0 = tl.load(s_cols + ((k_start + 96) // GROUP) * N, mask=col_ok, other=0.0)
        if BLOCK_K == 256:
            last1 = tl.load(s_cols + ((k_start + 224) // GROUP) * N, mask=col_ok, other=0.0)
        for k0 in range(k_start, k_start + K_SLICE, BLOCK_K):
            ahead = tl.minimum(k0 + BLOCK_K + 96, k_end) // GROUP  # within the slice
            next0 = tl.load(s_cols + ahead * N, mask=col_ok, other=0.0)
            acc = _block(acc, w_ptrs, x_ptrs, s_cols, last0, k0, col_ok, row_ok, N, GROUP, ASM)
            last0 = next0
            if BLOCK_K == 256:
                ahead = tl.minimum(k0 + BLOCK_K + 224, k_end) // GROUP
                next1 = tl.load(s_cols + ahead * N, mask=col_ok, other=0.0)
                acc = _block(acc, w_ptrs + 2048, x_ptrs + 128, s_cols, last1, k0 + 128, col_ok,
                             row_ok, N, GROUP, ASM)  # fmt: skip
                last1 = next1
            w_ptrs += 16 * BLOCK_K
            x_ptrs += BLOCK_K
        _finish(acc, y_ptr, p_ptr, lock_ptr, rows, cols, M, N, stride_ym, slice_size, SPLIT)

    return _w4a16


# The slice counters, one int32 per output tile, each back at 0 after every call; per device, grown
# when a call has more tiles (the earlier ones kept: a captured CUDA graph may still use them).
_LOCKS: dict = {}


def _locks(device, count: int):
    import torch

    held = _LOCKS.setdefault(str(device), [])
    if not held or held[-1].numel() < count:
        size = max(count, 4096, 2 * held[-1].numel() if held else 0)
        held.append(torch.zeros(size, dtype=torch.int32, device=device))
    return held[-1]


def _build():
    import torch
    import triton

    _w4a16 = _kernels()
    # Triton's interpreter (the unit tests) runs no PTX: there the planes come from Triton operations
    asm = os.environ.get("TRITON_INTERPRET") != "1"
    pdl = {}  # per device, the PDL keywords; Hopper: on (docs/runs/2026-12-07-w4a16-pdl-h100.json)

    def launch(x: torch.Tensor, w: torch.Tensor, s: torch.Tensor, group: int) -> torch.Tensor:
        (rows, k), n = x.shape, s.shape[-1]
        y = torch.empty((rows, n), dtype=x.dtype, device=x.device)
        if rows == 0:
            return y
        if x.device not in pdl:  # launch_pdl only with PDL: a keyword older Triton refuses
            on = asm and torch.cuda.get_device_capability(x.device)[0] >= 9
            pdl[x.device] = {"PDL": True, "launch_pdl": True} if on else {"PDL": False}
        block_m, block_n, block_k, warps, stages, split = tiles_for(n, k, group)
        if s.shape != (k // group, n) or w.shape != (-(-n // LAYOUT_N) * LAYOUT_N, k // 8):
            raise ValueError(f"weights {tuple(w.shape)}, scales {tuple(s.shape)}: prepare_weights")
        grid = (triton.cdiv(rows, block_m), triton.cdiv(n, block_n), split)
        partials = (
            y if split == 1 else torch.empty((split, rows, n), dtype=torch.float32, device=x.device)
        )
        locks = _locks(x.device, grid[0] * grid[1]) if split > 1 else y
        _w4a16[grid](x, w.view(torch.int16), s, y, partials, locks, rows, n, k // split, rows * n,
                     x.stride(0), k * 16, n, GROUP=group, BLOCK_M=block_m, BLOCK_N=block_n,
                     BLOCK_K=block_k, SPLIT=split, ASM=asm, **pdl[x.device],
                     num_warps=warps, num_stages=stages)  # fmt: skip
        return y

    return launch


_LAUNCH = None


def w4a16_matmul(x, weight_packed, weight_scale, group: int):
    """y[M, N] = x[M, K] @ dequant(weight_packed, weight_scale).T, batch-invariant (see the module
    docstring); the weights as prepare_weights lays them out."""
    global _LAUNCH
    if _LAUNCH is None:
        _LAUNCH = _build()
    return _LAUNCH(x.contiguous(), weight_packed, weight_scale, group)
