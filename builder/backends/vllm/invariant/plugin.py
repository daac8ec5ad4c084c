"""tritonbuild's batch-invariant W4A16 linear for vLLM: a vLLM general plugin (entry point group
`vllm.general_plugins`) that, when vLLM runs in batch-invariant mode (VLLM_BATCH_INVARIANT=1), makes
the compressed-tensors INT4 weight-only layers compute every row the same way whatever else is in
the batch.

Why: in batch-invariant mode vLLM 0.22 keeps its unquantized linears, attention, norms and
log-softmax invariant, but a W4A16 layer still goes to the mixed-precision kernel vLLM picks
(Machete on Hopper), whose tiling and split-K depend on the number of rows: an INT4 model's answers
then change with the batch (docs/runs, FACTS round 4).

The kernel here: one Triton GEMM with tiles fixed per layer shape (never per row count), the K loop
in one fixed order, fp32 accumulation, a fixed split of K whose slices are added in slice order. A
row's output is a function of that row and the layer alone: alone or amid 63 other requests,
prefill or decode, eager or in a CUDA graph, the bits are the same. Layout: compressed-tensors'
pack-quantized W4A16 as vLLM loads it (int32 words [N, K/8], eight 4-bit values per word along K,
low nibble first, +8 bias; scales [N, K/G]), changed once at load where the shape's tiles say so.

This file is copied into the serving environment (it never imports tritonbuild): `tritonbuild`
writes it with a dist-info into the plugin wheel (backends/_vllm_invariant.py).
"""

import logging

PLUGIN_NAME = "tritonbuild_invariant_w4a16"
KERNEL_NAME = "TritonbuildInvariantW4A16Kernel"
# Tiles, chosen by the layer's shape (N, K) only. SPLIT > 1 cuts K into that many fixed slices whose
# fp32 partial sums are added in slice order (REDUCE 1: by the tile's last program to finish, in the
# same kernel; 0: by a second kernel): the same reduction for every row count. SWAP 1 computes the
# tile transposed (weights as the MMA's left operand, dequantized in registers; rows as its narrow
# side), 0 as x @ W.T. SCALES_KN 1 keeps the scales as [K/G, N] (transposed once at load). PAIRS 1
# reorders each word's nibbles once at load so that one shift and one mask give two neighbouring
# weights as a pair of halves (_pairs_order). BLOCK_K divides the quantization group. None of them
# depends on the row count M.
TILE_FIELDS = ("block_m", "block_n", "block_k", "warps", "stages", "split", "swap", "scales_kn",
               "reduce", "pairs")  # fmt: skip
DEFAULT_TILES = (16, 64, 128, 4, 4, 1, 0, 0, 0, 0)
# Llama-3-8B's linears (qkv, o, gate_up, down; N x K): the fastest over decode at 1 and 64 rows in
# CUDA graphs of benchmarks/vllm/w4a16_bench.py on an H100 (docs/runs/2026-12-06-w4a16-kernel-h100.json)
TILES: dict[tuple[int, int], tuple[int, ...]] = {
    (6144, 4096): (32, 64, 128, 4, 4, 2, 1, 1, 1, 1),
    (4096, 4096): (32, 64, 128, 4, 4, 2, 1, 1, 1, 1),
    (28672, 4096): (64, 128, 128, 8, 3, 1, 1, 1, 0, 1),
    (4096, 14336): (64, 64, 128, 4, 3, 4, 1, 1, 1, 1),
}

# NOTE: a child of vLLM's "vllm" logger, the one vLLM configures (vllm 0.22.0 vllm/logger.py
# DEFAULT_LOGGING_CONFIG: a handler on "vllm" only); under this module's own name nothing is printed
_log = logging.getLogger("vllm.tritonbuild_invariant")


def tiles_for(n: int, k: int, group: int) -> tuple[int, ...]:
    """The layer's tiles (TILE_FIELDS): a function of its shape alone, so every batch size runs the
    same reduction."""
    tiles = list(TILES.get((n, k), DEFAULT_TILES))
    while group % tiles[2]:  # BLOCK_K divides the group
        tiles[2] //= 2
    while tiles[5] > 1 and (k % tiles[5] or (k // tiles[5]) % group):  # SPLIT: whole groups
        tiles[5] //= 2
    return tuple(tiles)


def _pairs_order(words):
    """compressed-tensors' int32 words [N, K/8] with each word's nibbles reordered for PAIRS: slot s
    (bits 4s..4s+3) holds K offset (0, 2, 4, 6, 1, 3, 5, 7)[s], so (word >> 4i) & 0x000F000F holds
    offsets 2i and 2i + 1 in its two 16-bit halves."""
    import torch

    shifts = torch.arange(8, device=words.device, dtype=torch.int64) * 4
    out = []
    for chunk in words.split(4096):  # int64 nibbles of 4096 rows at a time (memory)
        nibbles = ((chunk.long()[..., None] >> shifts) & 0xF)[..., [0, 2, 4, 6, 1, 3, 5, 7]]
        word = (nibbles << shifts).sum(-1)
        out.append(torch.where(word >= 2**31, word - 2**32, word).to(torch.int32))
    return torch.cat(out).contiguous()


def _as_read(data, tiles, words: bool):
    """compressed-tensors' [N, K/8] words or [N, K/G] scales as the tiles read them (PAIRS: nibbles
    reordered; SCALES_KN: scales [K/G, N]); contiguous."""
    if words:
        return _pairs_order(data) if tiles[9] else data.contiguous()
    return (data.t() if tiles[7] else data).contiguous()


def prepare_weights(weight_packed, weight_scale, group: int):
    """The layer's words and scales as its tiles read them (_as_read)."""
    tiles = tiles_for(weight_packed.shape[0], weight_packed.shape[1] * 8, group)
    return _as_read(weight_packed, tiles, True), _as_read(weight_scale, tiles, False)


# The GEMM's Triton functions once _kernels() has run. NOTE: module globals, not closures: Triton's
# interpreter (TRITON_INTERPRET=1, the unit tests) re-executes a kernel's source in its module's
# globals, without the closure; the compiler finds them there too.
_weight_tile = None
_finish = None


def _kernels():
    """The Triton kernels: the GEMM over one K slice per program, the slices' sum (REDUCE 0)."""
    import triton
    import triton.language as tl

    global _weight_tile, _finish
    _weight_tile = _weight_tile_function(triton, tl)
    _finish = _finish_function(triton, tl)
    return _gemm_kernel(triton, tl), _sum_kernel(triton, tl)


def _weight_tile_function(triton, tl):
    """A [BLOCK_N, BLOCK_K] tile of q - 8 times scale (the group's scales) in the activations'
    dtype, from the packed [BLOCK_N, BLOCK_K/8] int32 words of the tile's columns. q - 8 without a
    conversion instruction (a quarter-rate I2F per weight bounded the kernel on the H100): q under a
    float's exponent bits is exactly 1024 + q (fp16) or 128 + q (bf16), minus 1032 or 136 is q - 8.
    PAIRS 0: each word repeated to its eight K positions (three self-interleaves) and shifted to its
    nibble; 1: four shift-and-masks per word, each two weights (_pairs_order) in one int32's halves."""

    @triton.jit
    def _weight_tile(packed, scale, x_ptr, BLOCK_K: tl.constexpr, PAIRS: tl.constexpr):
        dt = x_ptr.dtype.element_ty
        if dt == tl.bfloat16:  # the exponent bits of 128 (twice: two halves), the bits of 136
            magic, bias = 0x43004300, tl.full((1, 1), 0x4308, tl.int16).to(dt, bitcast=True)
        else:  # of 1024 and 1032
            magic, bias = 0x64006400, tl.full((1, 1), 0x6408, tl.int16).to(dt, bitcast=True)
        if PAIRS:
            t0, t1 = (packed & 0xF000F) | magic, ((packed >> 4) & 0xF000F) | magic
            t2, t3 = ((packed >> 8) & 0xF000F) | magic, ((packed >> 12) & 0xF000F) | magic
            # [.., 2, 2]: t_i at offset 2i in the low half, 2i + 1 in the high; then [.., 2, 2, 2]
            lo = tl.join(tl.join(t0, t2), tl.join(t1, t3))
            hi = (lo >> 16).to(tl.int16).to(dt, bitcast=True)
            w = tl.join(lo.to(tl.int16).to(dt, bitcast=True), hi)
            w = tl.reshape(w, (packed.shape[0], BLOCK_K))
        else:
            packed = tl.interleave(packed, packed)
            packed = tl.interleave(packed, packed)
            packed = tl.interleave(packed, packed)
            q = (packed >> ((tl.arange(0, BLOCK_K) % 8) * 4)[None, :]) & 0xF
            w = (q | (magic & 0xFFFF)).to(tl.int16).to(dt, bitcast=True)
        return (w - bias) * scale[:, None]

    return _weight_tile


def _finish_function(triton, tl):
    """A program's tile (fp32 sums over its K slice; rows x cols of the [M, N] output) written:
    straight to y without a split; else to its slice of the fp32 partials p, and with REDUCE the
    tile's last program to finish (a per-tile counter) adds the SPLIT slices in slice order, writes y
    and sets the counter back to 0 (for the next call, a CUDA-graph replay included)."""

    @triton.jit
    def _finish(acc, y_ptr, p_ptr, lock_ptr, rows, cols, M, N, stride_ym, slice_size,
                SPLIT: tl.constexpr, SWAP: tl.constexpr, REDUCE: tl.constexpr):  # fmt: skip
        if SWAP:  # acc[n, m]
            offs = rows[None, :] * stride_ym + cols[:, None]
            mask = (rows < M)[None, :] & (cols < N)[:, None]
        else:
            offs = rows[:, None] * stride_ym + cols[None, :]
            mask = (rows < M)[:, None] & (cols < N)[None, :]
        if SPLIT == 1:
            tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=mask)
        else:
            tl.store(p_ptr + tl.program_id(2) * slice_size + offs, acc, mask=mask)
            if REDUCE:
                lock = lock_ptr + tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
                tl.debug_barrier()  # every thread's partial stored before the counter moves
                if tl.atomic_add(lock, 1, sem="acq_rel") == SPLIT - 1:
                    total = tl.load(p_ptr + offs, mask=mask, cache_modifier=".cg")
                    # a loop, not unrolled: one slice in flight at a time (registers)
                    for s in range(1, SPLIT):
                        total += tl.load(p_ptr + s * slice_size + offs, mask=mask, cache_modifier=".cg")  # fmt: skip
                    tl.store(y_ptr + offs, total.to(y_ptr.dtype.element_ty), mask=mask)
                    tl.atomic_xchg(lock, 0)

    return _finish


def _gemm_kernel(triton, tl):
    """The W4A16 GEMM: one [BLOCK_M, BLOCK_N] output tile over one K slice per program."""

    # NOTE: M (the row count) not specialized: Triton compiles a separate variant for an int
    # argument equal to 1 or divisible by 16; with this one binary per layer shape, every row count
    # runs the same compiled code
    @triton.jit(do_not_specialize=["M", "slice_size"])
    def _w4a16(x_ptr, w_ptr, s_ptr, y_ptr, p_ptr, lock_ptr, M, N, K_SLICE, slice_size, stride_xm,
        stride_wn, stride_sn, stride_sk, stride_ym, GROUP: tl.constexpr, BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr, SWAP: tl.constexpr,
        REDUCE: tl.constexpr, PAIRS: tl.constexpr):  # fmt: skip
        # axis 0: row tiles (programs sharing a weight tile run together: L2); axis 2: K slice
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < M
        col_ok = cols < N
        ks = tl.arange(0, BLOCK_K)
        k_start = tl.program_id(2) * K_SLICE
        # pointers advanced by one tile per step (k_start: a multiple of BLOCK_K: 16-byte loads)
        words = tl.multiple_of(k_start // 8, BLOCK_K // 8) + tl.arange(0, BLOCK_K // 8)
        w_ptrs = w_ptr + cols[:, None] * stride_wn + words[None, :]
        if SWAP:  # acc[n, m]: W tile @ x tile.T
            acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
            x_ptrs, x_mask = (
                x_ptr + rows[None, :] * stride_xm + (k_start + ks)[:, None],
                row_ok[None, :],
            )
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            x_ptrs, x_mask = (
                x_ptr + rows[:, None] * stride_xm + (k_start + ks)[None, :],
                row_ok[:, None],
            )
        # the scales loaded one step ahead (a load the pipeliner leaves in the loop: too narrow for
        # an async copy; waited for there, it stalled every step)
        s_cols = s_ptr + cols * stride_sn
        scale = tl.load(s_cols + (k_start // GROUP) * stride_sk, mask=col_ok, other=0.0)
        for k0 in range(k_start, k_start + K_SLICE, BLOCK_K):
            ahead = tl.minimum(k0 + BLOCK_K, k_start + K_SLICE - 1) // GROUP  # within the slice
            scale_ahead = tl.load(s_cols + ahead * stride_sk, mask=col_ok, other=0.0)
            packed = tl.load(w_ptrs, mask=col_ok[:, None])
            w = _weight_tile(packed, scale, x_ptr, BLOCK_K, PAIRS)
            x = tl.load(x_ptrs, mask=x_mask, other=0.0)
            if SWAP:
                acc += tl.dot(w, x, out_dtype=tl.float32)
            else:
                acc += tl.dot(x, tl.trans(w), out_dtype=tl.float32)
            scale = scale_ahead
            w_ptrs += BLOCK_K // 8
            x_ptrs += BLOCK_K
        _finish(acc, y_ptr, p_ptr, lock_ptr, rows, cols, M, N, stride_ym, slice_size, SPLIT, SWAP,
                REDUCE)  # fmt: skip

    return _w4a16


def _sum_kernel(triton, tl):
    """The K slices' fp32 partial sums added in slice order, for every element and row count."""

    @triton.jit
    def _slices_sum(p_ptr, y_ptr, SIZE, stride_s, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        ok = offs < SIZE
        acc = tl.load(p_ptr + offs, mask=ok, other=0.0)
        for s in tl.static_range(1, SPLIT):
            acc += tl.load(p_ptr + s * stride_s + offs, mask=ok, other=0.0)
        tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=ok)

    return _slices_sum


# The REDUCE counters, one int32 per output tile, each back at 0 after every call; per device, grown
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

    _w4a16, _slices_sum = _kernels()

    def launch(x: torch.Tensor, w: torch.Tensor, s: torch.Tensor, group: int) -> torch.Tensor:
        (rows, k), n = x.shape, w.shape[0]
        y = torch.empty((rows, n), dtype=x.dtype, device=x.device)
        if rows == 0:
            return y
        block_m, block_n, block_k, warps, stages, split, swap, kn, reduce, pairs = tiles_for(n, k, group)  # fmt: skip
        if s.shape != ((k // group, n) if kn else (n, k // group)):
            raise ValueError(f"scales {tuple(s.shape)} not in the tiles' layout: prepare_weights")
        grid = (triton.cdiv(rows, block_m), triton.cdiv(n, block_n), split)
        partials = (
            y if split == 1 else torch.empty((split, rows, n), dtype=torch.float32, device=x.device)
        )
        locks = _locks(x.device, grid[0] * grid[1]) if split > 1 and reduce else y
        (stride_sk, stride_sn) = s.stride() if kn else s.stride()[::-1]
        _w4a16[grid](x, w, s, y, partials, locks, rows, n, k // split, rows * n, x.stride(0),
                     w.stride(0), stride_sn, stride_sk, n, GROUP=group, BLOCK_M=block_m,
                     BLOCK_N=block_n, BLOCK_K=block_k, SPLIT=split, SWAP=swap, REDUCE=reduce,
                     PAIRS=pairs, num_warps=warps, num_stages=stages)  # fmt: skip
        if split > 1 and not reduce:
            grid = (triton.cdiv(rows * n, 1024),)
            _slices_sum[grid](partials, y, rows * n, rows * n, SPLIT=split, BLOCK=1024)
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


def _custom_op():
    """The kernel as a torch custom op, so vLLM's torch.compile treats it as one opaque call (fake:
    shapes only)."""
    import torch

    @torch.library.custom_op("tritonbuild::w4a16_invariant", mutates_args=())
    def op(
        x: torch.Tensor, weight_packed: torch.Tensor, weight_scale: torch.Tensor, group: int
    ) -> torch.Tensor:
        return w4a16_matmul(x, weight_packed, weight_scale, group)

    @op.register_fake
    def _(x, weight_packed, weight_scale, group):
        return x.new_empty((x.shape[0], weight_packed.shape[0]))

    return op


def _kernel_class():
    import torch
    from vllm.model_executor.kernels.linear.mixed_precision.MPLinearKernel import MPLinearKernel
    from vllm.model_executor.parameter import permute_param_layout_
    from vllm.scalar_type import scalar_types

    op = _custom_op()

    class TritonbuildInvariantW4A16Kernel(MPLinearKernel):
        @classmethod
        def get_min_capability(cls) -> int:
            return 80

        @classmethod
        def can_implement(cls, c) -> tuple[bool, str | None]:
            k, _n = c.partition_weight_shape
            group = c.group_size if c.group_size != -1 else k
            problems = [
                c.weight_type != scalar_types.uint4b8
                and f"weight type {c.weight_type} (needs symmetric uint4b8)",
                c.zero_points and "zero points (asymmetric)",
                c.has_g_idx and "activation reordering (g_idx)",
                c.act_type not in (torch.float16, torch.bfloat16) and f"activations {c.act_type}",
                (group % 16 or k % group) and f"group size {group} with K {k}",
            ]
            problems = [p for p in problems if p]
            return (not problems, "; ".join(problems) or None)

        def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
            k, n = self.config.partition_weight_shape
            group = self.config.group_size if self.config.group_size != -1 else k
            tiles = tiles_for(n, k, group)

            # [N, K/8] words and [N, K/G] scales, then as the shape's tiles read them (_as_read)
            def as_nk(param):
                permute_param_layout_(
                    param,
                    input_dim=1,
                    output_dim=0,
                    **({"packed_dim": 1} if param.dtype == torch.int32 else {}),
                )
                param.data = _as_read(param.data, tiles, param.dtype == torch.int32)
                return param

            self._transform_param(layer, self.w_q_name, as_nk)
            self._transform_param(layer, self.w_s_name, as_nk)

        def apply_weights(self, layer, x, bias=None):
            c = self.config
            k = c.partition_weight_shape[0]
            w_q, w_s, _, _ = self._get_weight_params(layer)
            y = op(x.reshape(-1, x.shape[-1]), w_q, w_s, c.group_size if c.group_size != -1 else k)
            if bias is not None:
                y = y + bias
            return y.reshape(*x.shape[:-1], c.partition_weight_shape[1])

    return TritonbuildInvariantW4A16Kernel


def register() -> None:
    """vLLM's general-plugin hook (every vLLM process calls it at start): in batch-invariant mode,
    put this kernel first among the CUDA mixed-precision kernels. Outside that mode it changes
    nothing."""
    import vllm.envs as envs

    # vLLM's own parse of the variable (bool(int(...))), so both agree on the mode
    if not envs.VLLM_BATCH_INVARIANT:
        return
    from vllm.model_executor.kernels.linear import _POSSIBLE_KERNELS
    from vllm.platforms import PlatformEnum

    kernels = _POSSIBLE_KERNELS.setdefault(PlatformEnum.CUDA, [])
    if not any(k.__name__ == KERNEL_NAME for k in kernels):
        kernels.insert(0, _kernel_class())
        _log.info(
            "tritonbuild: %s first among the W4A16 kernels (VLLM_BATCH_INVARIANT)", KERNEL_NAME
        )
