"""tritonbuild's batch-invariant W4A16 linear for vLLM: a vLLM general plugin (entry point group
`vllm.general_plugins`) that, when vLLM runs in batch-invariant mode (VLLM_BATCH_INVARIANT=1), makes
the compressed-tensors INT4 weight-only layers compute every row the same way whatever else is in
the batch.

Why: in batch-invariant mode vLLM 0.22 keeps its unquantized linears, attention, norms and
log-softmax invariant, but a W4A16 layer still goes to the mixed-precision kernel vLLM picks
(Machete on Hopper), whose tiling and split-K depend on the number of rows: an INT4 model's answers
then change with the batch (docs/runs, FACTS round 4).

The kernel here: one Triton GEMM with tiles fixed per layer shape (never per row count), no split-K,
the K loop in one fixed order, fp32 accumulation. A row's output is a function of that row and the
layer alone: alone or amid 63 other requests, prefill or decode, eager or in a CUDA graph, the bits
are the same. Layout: compressed-tensors' pack-quantized W4A16 as vLLM loads it (weight_packed int32
[N, K/8], eight 4-bit values per int32 along K, low nibble first, stored with a +8 bias;
weight_scale [N, K/G]); nothing is repacked.

This file is copied into the serving environment (it never imports tritonbuild): `tritonbuild`
writes it with a dist-info into the plugin wheel (backends/_vllm_invariant.py).
"""

import logging

PLUGIN_NAME = "tritonbuild_invariant_w4a16"
KERNEL_NAME = "TritonbuildInvariantW4A16Kernel"
# Tiles (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, SPLIT, GATHER), chosen by the layer's
# shape (N, K) only: SPLIT > 1 cuts K into that many fixed slices whose fp32 partial sums are added
# in slice order by a second kernel (more memory in flight for decode, and the same reduction for
# every row count). BLOCK_K must divide the quantization group. Measured on the H200 at Llama-3-8B's
# shapes (benchmarks/vllm/w4a16_bench.py).
# GATHER: how a tile's int4 values reach their K positions (1: one load per position, 0: one per
# word, then interleaved). KN: 1 keeps the weights as [K/8, N] words and scales as [K/G, N]
# (transposed once when vLLM hands them over: loads contiguous along N), 0 as compressed-tensors
# lays them out ([N, K/8], [N, K/G]). None of them changes a row's arithmetic.
DEFAULT_TILES = (16, 64, 128, 4, 4, 1, 0, 0)
# Llama-3-8B's linears (qkv, o, gate_up, down; N x K), the fastest of benchmarks/vllm/w4a16_bench.py
# --quick over decode at 1 and 64 rows, in CUDA graphs
# (docs/runs/2026-12-04-w4a16-kernel-h200-graphs.json)
TILES: dict[tuple[int, int], tuple[int, ...]] = {
    (6144, 4096): (16, 128, 64, 4, 4, 8, 0, 0),
    (4096, 4096): (16, 32, 128, 4, 4, 4, 0, 0),
    (28672, 4096): (64, 128, 64, 4, 4, 1, 0, 0),
    (4096, 14336): (16, 128, 64, 4, 4, 8, 0, 0),
}

# NOTE: a child of vLLM's "vllm" logger, the one vLLM configures (vllm 0.22.0 vllm/logger.py
# DEFAULT_LOGGING_CONFIG: a handler on "vllm" only); under this module's own name an INFO record has
# no handler and is never printed
_log = logging.getLogger("vllm.tritonbuild_invariant")


def tiles_for(n: int, k: int, group: int) -> tuple[int, ...]:
    """The layer's tiles: a function of its shape alone, so every batch size runs the same
    reduction."""
    block_m, block_n, block_k, warps, stages, split, gather, kn = TILES.get((n, k), DEFAULT_TILES)
    while group % block_k:
        block_k //= 2
    while split > 1 and (k % split or (k // split) % group):
        split //= 2
    return block_m, block_n, block_k, warps, stages, split, gather, kn


def prepare_weights(weight_packed, weight_scale, group: int):
    """compressed-tensors' [N, K/8] words and [N, K/G] scales in the layout the layer's tiles read
    (KN: transposed, contiguous)."""
    n, k = weight_packed.shape[0], weight_packed.shape[1] * 8
    if tiles_for(n, k, group)[7]:
        return weight_packed.t().contiguous(), weight_scale.t().contiguous()
    return weight_packed.contiguous(), weight_scale.contiguous()


# The GEMM's weight read (a Triton function) once _kernels() has run. NOTE: a module global, not a
# closure: Triton's interpreter (TRITON_INTERPRET=1, the unit tests) re-executes a kernel's source
# in its module's globals, without the closure; the compiler finds it there too.
_weight_tile = None


def _kernels():
    """The two Triton kernels: the W4A16 GEMM over one K slice per program, and the slices' sum."""
    import triton
    import triton.language as tl

    global _weight_tile
    _weight_tile = _weight_tile_function(triton, tl)
    return _gemm_kernel(triton, tl), _sum_kernel(triton, tl)


def _weight_tile_function(triton, tl):
    """The GEMM's weight read at K offset k0: a [BLOCK_K, BLOCK_N] tile of int4 values times their
    scales, in the dtype of x (the activation tile); ks is tl.arange(0, BLOCK_K), nibble each K
    position's bit offset in its int32 word."""

    @triton.jit
    def _weight_tile(
        w_ptr,
        scale,
        cols,
        col_ok,
        k0,
        ks,
        nibble,
        x,
        stride_wn,
        stride_wk,
        GATHER: tl.constexpr,
        KN: tl.constexpr,
    ):
        if KN:
            # a [BLOCK_K, BLOCK_N] tile, each K row reading its words along N (eight rows share a
            # word row)
            packed = tl.load(
                w_ptr + ((k0 + ks) // 8)[:, None] * stride_wk + cols[None, :] * stride_wn,
                mask=col_ok[None, :],
                other=0,
            )
            w = (((packed >> nibble[:, None]) & 0xF) - 8).to(x.dtype) * scale[None, :]
        else:
            if GATHER:
                # each K position reads its int32 word (eight share one: cache hits)
                packed = tl.load(
                    w_ptr + cols[:, None] * stride_wn + ((k0 + ks) // 8)[None, :] * stride_wk,
                    mask=col_ok[:, None],
                    other=0,
                )
            else:
                # each word read once, then repeated to its eight K positions by three
                # self-interleaves
                words = k0 // 8 + tl.arange(0, ks.shape[0] // 8)  # BLOCK_K // 8
                packed = tl.load(
                    w_ptr + cols[:, None] * stride_wn + words[None, :] * stride_wk,
                    mask=col_ok[:, None],
                    other=0,
                )
                packed = tl.interleave(packed, packed)
                packed = tl.interleave(packed, packed)
                packed = tl.interleave(packed, packed)
            w = tl.trans((((packed >> nibble[None, :]) & 0xF) - 8).to(x.dtype) * scale[:, None])
        return w

    return _weight_tile


def _gemm_kernel(triton, tl):
    """The W4A16 GEMM: one [BLOCK_M, BLOCK_N] output tile over one K slice per program."""

    # NOTE: M (the row count) not specialized: Triton compiles a separate variant for an int
    # argument equal to 1 or divisible by 16; with this one binary per layer shape, every row count
    # runs the same compiled code
    @triton.jit(do_not_specialize=["M"])
    def _w4a16(
        x_ptr,
        w_ptr,
        s_ptr,
        y_ptr,
        M,
        N,
        K_SLICE,
        stride_xm,
        stride_wn,
        stride_wk,
        stride_sn,
        stride_sk,
        stride_ym,
        stride_ys,
        GROUP: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
        GATHER: tl.constexpr,
        KN: tl.constexpr,
    ):
        # axis 0 walks the row tiles so that CTAs sharing a weight tile run together (L2 reuse);
        # axis 2: K slice
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        k_start = tl.program_id(2) * K_SLICE
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < M
        col_ok = cols < N
        ks = tl.arange(0, BLOCK_K)
        nibble = (ks % 8) * 4
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(k_start, k_start + K_SLICE, BLOCK_K):
            x = tl.load(
                x_ptr + rows[:, None] * stride_xm + (k0 + ks)[None, :],
                mask=row_ok[:, None],
                other=0.0,
            )
            scale = tl.load(
                s_ptr + cols * stride_sn + (k0 // GROUP) * stride_sk, mask=col_ok, other=0.0
            )
            w = _weight_tile(
                w_ptr, scale, cols, col_ok, k0, ks, nibble, x, stride_wn, stride_wk, GATHER, KN
            )
            acc += tl.dot(x, w, out_dtype=tl.float32)
        out = y_ptr + tl.program_id(2) * stride_ys + rows[:, None] * stride_ym + cols[None, :]
        tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])

    return _w4a16


def _sum_kernel(triton, tl):
    """The K slices' fp32 partial sums added in slice order: the same order for every element and
    row count."""

    @triton.jit
    def _slices_sum(p_ptr, y_ptr, SIZE, stride_s, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        ok = offs < SIZE
        acc = tl.load(p_ptr + offs, mask=ok, other=0.0)
        for s in tl.static_range(1, SPLIT):
            acc += tl.load(p_ptr + s * stride_s + offs, mask=ok, other=0.0)
        tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=ok)

    return _slices_sum


def _build():
    import torch
    import triton

    _w4a16, _slices_sum = _kernels()

    def launch(x: torch.Tensor, w: torch.Tensor, s: torch.Tensor, group: int) -> torch.Tensor:
        rows, k = x.shape
        # NOTE: [K/8, N] when the shape's tiles say KN (prepare_weights made it so), else [N, K/8]
        kn = w.shape[0] == k // 8 and tiles_for(w.shape[1], k, group)[7]
        n = w.shape[1] if kn else w.shape[0]
        y = torch.empty((rows, n), dtype=x.dtype, device=x.device)
        if rows == 0:
            return y
        block_m, block_n, block_k, warps, stages, split, gather, _ = tiles_for(n, k, group)
        grid = (triton.cdiv(rows, block_m), triton.cdiv(n, block_n), split)
        target = (
            y if split == 1 else torch.empty((split, rows, n), dtype=torch.float32, device=x.device)
        )
        (stride_wn, stride_wk), (stride_sn, stride_sk) = (
            (w.stride()[::-1], s.stride()[::-1]) if kn else (w.stride(), s.stride())
        )
        _w4a16[grid](
            x,
            w,
            s,
            target,
            rows,
            n,
            k // split,
            x.stride(0),
            stride_wn,
            stride_wk,
            stride_sn,
            stride_sk,
            n,
            rows * n,
            GROUP=group,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            GATHER=gather,
            KN=int(kn),
            num_warps=warps,
            num_stages=stages,
        )
        if split > 1:
            _slices_sum[(triton.cdiv(rows * n, 1024),)](
                target, y, rows * n, rows * n, SPLIT=split, BLOCK=1024
            )
        return y

    return launch


_LAUNCH = None


def w4a16_matmul(x, weight_packed, weight_scale, group: int):
    """y[M, N] = x[M, K] @ dequant(weight_packed, weight_scale).T, batch-invariant (see the module
    docstring)."""
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
            kn = tiles_for(n, k, group)[7]

            # then [K/8, N] / [K/G, N] where the shape's tiles read KN (prepare_weights)
            def as_nk(param):
                permute_param_layout_(
                    param,
                    input_dim=1,
                    output_dim=0,
                    **({"packed_dim": 1} if param.dtype == torch.int32 else {}),
                )
                param.data = param.data.t().contiguous() if kn else param.data.contiguous()
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
