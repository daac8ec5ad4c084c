"""tritonbuild's batch-invariant fp16/bf16 linear for vLLM's unquantized layers: y = x @ W.T with a
reduction order fixed by the layer's shape (N, K) alone, never by the row count M, the rows beside
a row or the CUDA-graph capture size.

Why: in batch-invariant mode vLLM 0.22 sends every unquantized linear to its Triton persistent
matmul (UnquantizedLinearMethod.apply -> linear_batch_invariant -> matmul_persistent; facts:
tests/contracts/facts/vllm_plugin.json "unquantized_linear"), whose tiles are 128 rows by 256
columns and whose grid is one program per tile up to one per SM: at one row a 4096-column layer
runs on 16 programs. The construction here is the W4A16 kernel's (w4a16.py) on dense weights:
weight columns on the MMA's wide side, rows on its narrow side, tiles and a split of K into fixed
slices chosen per layer shape (TILES), fp32 sums, the slices' partial sums added in slice order by
the tile's last program to finish. The lm_head (vLLM's batch-invariant matmul too) comes here only
where measured no slower at every row count its logits can have (LM_HEAD_MEASURED, mark_lm_head).

It never imports tritonbuild: the wheel carries it beside the plugin, whose register() calls
install() in batch-invariant mode.
"""

import logging
import os

OP_NAME = "tritonbuild::linear16_invariant"
TILE_FIELDS = ("block_m", "block_n", "block_k", "warps", "stages", "split")
DEFAULT_TILES = (16, 64, 128, 4, 4, 1)
# Llama-3-8B's linears (qkv, o, gate_up, down; N x K), tiles of the shape only: the sweep's choice on an
# H100 (benchmarks/vllm/linear16_bench.py: fastest at 1 row whose 64 rows stay within 1.25x cuBLAS
# fp16; docs/runs/2026-12-06-fp16-invariant-kernel-h100.json). Chosen for decode: 256 rows take
# 1.6x vLLM's batch-invariant linear's time there.
TILES: dict[tuple[int, int], tuple[int, ...]] = {
    (6144, 4096): (16, 64, 128, 4, 4, 2),
    (4096, 4096): (16, 64, 128, 4, 4, 2),
    (28672, 4096): (32, 128, 128, 4, 4, 1),
    (4096, 14336): (16, 64, 128, 4, 4, 2),
    # Llama-3-8B's lm_head (vocabulary x hidden): benchmarks/vllm/linear16_lm_head.py's sweep on an
    # H100 (docs/runs/2026-12-07-lm-head-h100.json)
    (128256, 4096): (32, 128, 128, 4, 4, 1),
}
# The lm_head goes to this kernel only where it was measured no slower than vLLM's batch-invariant
# matmul at every row count its logits can have: (GPU name, (N, K)) -> the largest max_num_seqs
# (the logits' rows per step, prompt log-probs aside). docs/runs/2026-12-07-lm-head-h100.json: 1.65x
# vLLM's at 1 row, 1.14x at 64, 0.71x at 128 (single readings).
LM_HEAD_MEASURED: dict[tuple[str, tuple[int, int]], int] = {
    ("NVIDIA H100 80GB HBM3", (128256, 4096)): 64
}

_log = logging.getLogger("vllm.tritonbuild_invariant")


def tiles_for(n: int, k: int) -> tuple[int, ...]:
    """The layer's tiles (TILE_FIELDS), a function of its shape alone: BLOCK_K halved (down to 16)
    until it is no wider than K, SPLIT halved until each slice holds at least one BLOCK_K step."""
    block_m, block_n, block_k, warps, stages, split = TILES.get((n, k), DEFAULT_TILES)
    while block_k > 16 and block_k > k:
        block_k //= 2
    while split > 1 and -(-k // split) < block_k:
        split //= 2
    return (block_m, block_n, block_k, warps, stages, split)


def k_slice_for(k: int, block_k: int, split: int) -> int:
    """K per slice: whole BLOCK_K steps, the last slice cut short by K (masked)."""
    per_slice = -(-k // split)
    return -(-per_slice // block_k) * block_k


# The kernel's Triton functions once _kernel() has run: module globals, not closures (Triton's
# interpreter re-executes a kernel's source in its module's globals).
_finish = None


def _kernel():
    import triton
    import triton.language as tl

    global _finish
    _finish = _finish_function(triton, tl)
    return _gemm_kernel(triton, tl)


def _finish_function(triton, tl):
    """A program's tile (fp32 sums over its K slice; acc[n, m] of the [M, N] output) written:
    straight to y without a split; else to its slice of the fp32 partials p, and the tile's last
    program to finish (a per-tile counter) adds the SPLIT slices in slice order 0, 1, ..., writes y
    and sets the counter back to 0 (for the next call, a CUDA-graph replay included)."""

    @triton.jit
    def _finish(acc, y_ptr, p_ptr, lock_ptr, rows, cols, M, N, stride_ym, slice_size,
                SPLIT: tl.constexpr):  # fmt: skip
        offs = rows[None, :].to(tl.int64) * stride_ym + cols[:, None]
        mask = (rows < M)[None, :] & (cols < N)[:, None]
        if SPLIT == 1:
            tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=mask)
        else:
            part, step = p_ptr + offs, slice_size.to(tl.int64)
            tl.store(part + tl.program_id(2) * step, acc, mask=mask)
            lock = lock_ptr + tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
            tl.debug_barrier()  # every thread's partial stored before the counter moves
            if tl.atomic_add(lock, 1, sem="acq_rel") == SPLIT - 1:
                total = tl.load(part, mask=mask, cache_modifier=".cg")
                for s in tl.static_range(1, SPLIT):
                    total += tl.load(part + s * step, mask=mask, cache_modifier=".cg")
                tl.store(y_ptr + offs, total.to(y_ptr.dtype.element_ty), mask=mask)
                tl.atomic_xchg(lock, 0, sem="relaxed")  # read by a later launch: no fence needed

    return _finish


def _gemm_kernel(triton, tl):
    """acc[n, m] = W tile @ x tile.T: one [BLOCK_N, BLOCK_M] tile over one K slice per program,
    BLOCK_K per step in K order. Rows and columns past the end read row or column 0 (an output
    element is its own dot product: what a padding lane reads reaches no other) and are not
    stored; K past the end is read as zeros where K is not whole slices (EVEN_K False)."""

    # NOTE: M not specialized: Triton compiles another variant for an int argument equal to 1 or
    # divisible by 16; with one binary per layer shape every row count runs the same code
    @triton.jit(do_not_specialize=["M", "slice_size"])
    def _linear16(x_ptr, w_ptr, y_ptr, p_ptr, lock_ptr, M, N, K, K_SLICE, slice_size, stride_xm,
                  stride_wn, stride_ym, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, SPLIT: tl.constexpr, EVEN_K: tl.constexpr,
                  PDL: tl.constexpr):  # fmt: skip
        if PDL:  # programmatic dependent launch: nothing read before the kernel ahead ends
            tl.extra.cuda.gdc_wait()
        # axis 0: row tiles (programs sharing a weight tile run together: L2); axis 2: K slice
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        k_start = tl.program_id(2) * K_SLICE
        ks = k_start + tl.arange(0, BLOCK_K)
        w_rows = tl.where(cols < N, cols, 0).to(tl.int64) * stride_wn
        x_rows = tl.where(rows < M, rows, 0).to(tl.int64) * stride_xm
        w_ptrs = w_ptr + w_rows[:, None] + ks[None, :]
        x_ptrs = x_ptr + x_rows[None, :] + ks[:, None]
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
        for k0 in range(k_start, k_start + K_SLICE, BLOCK_K):
            if EVEN_K:
                w = tl.load(w_ptrs)
                x = tl.load(x_ptrs)
            else:
                k_ok = k0 + tl.arange(0, BLOCK_K) < K
                w = tl.load(w_ptrs, mask=k_ok[None, :], other=0.0)
                x = tl.load(x_ptrs, mask=k_ok[:, None], other=0.0)
            acc = tl.dot(w, x, acc, out_dtype=tl.float32)
            w_ptrs += BLOCK_K
            x_ptrs += BLOCK_K
        _finish(acc, y_ptr, p_ptr, lock_ptr, rows, cols, M, N, stride_ym, slice_size, SPLIT)

    return _linear16


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


_KERNEL = None
# Programmatic dependent launch on Hopper and later (each call launched while the kernel ahead drains, as
# w4a16.py's W4A16 kernel: 0.985x at one row, 0.99x at 64 on an H100, docs/runs/2026-12-07-w4a16-pdl-h100.json);
# a benchmark sets it False to time the kernel without
USE_PDL = True
_PDL: dict = {}  # per device: whether it can launch with PDL (Hopper and later, not the interpreter)
# the launch's keywords; launch_pdl only with PDL: a keyword older Triton refuses
_PDL_ON, _PDL_OFF = {"PDL": True, "launch_pdl": True}, {"PDL": False}


def linear16(x, weight):
    """y[M, N] = x[M, K] @ weight[N, K].T in x's dtype (fp16 or bf16), batch-invariant: a row's
    bits depend on that row and the layer alone (see the module docstring)."""
    import torch

    global _KERNEL
    if _KERNEL is None:
        _KERNEL = _kernel()
    (rows, k), n = x.shape, weight.shape[0]
    if weight.shape[1] != k or weight.dtype != x.dtype or weight.stride(1) != 1:
        raise ValueError(f"weight {tuple(weight.shape)} {weight.dtype} for x {tuple(x.shape)}")
    x = x.contiguous()
    y = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    if rows == 0:
        return y
    block_m, block_n, block_k, warps, stages, split = tiles_for(n, k)
    k_slice = k_slice_for(k, block_k, split)
    grid = (-(-rows // block_m), -(-n // block_n), split)
    partials = (
        y if split == 1 else torch.empty((split, rows, n), dtype=torch.float32, device=x.device)
    )
    locks = _locks(x.device, grid[0] * grid[1]) if split > 1 else y
    if x.device not in _PDL:  # not in Triton's interpreter (the unit tests): it runs no PTX
        on = os.environ.get("TRITON_INTERPRET") != "1"
        _PDL[x.device] = on and torch.cuda.get_device_capability(x.device)[0] >= 9
    pdl = _PDL_ON if USE_PDL and _PDL[x.device] else _PDL_OFF
    _KERNEL[grid](x, weight, y, partials, locks, rows, n, k, k_slice, rows * n, x.stride(0),
                  weight.stride(0), n, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                  SPLIT=split, EVEN_K=k_slice * split == k, **pdl,
                  num_warps=warps, num_stages=stages)  # fmt: skip
    return y


def _custom_op():
    """The kernel as a torch custom op, so vLLM's torch.compile treats it as one opaque call."""
    import torch

    @torch.library.custom_op(OP_NAME, mutates_args=())
    def op(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return linear16(x, weight)

    @op.register_fake
    def _(x, weight):
        return x.new_empty((x.shape[0], weight.shape[0]))

    return op


def takes(x, weight) -> bool:
    """Whether the kernel computes this call: fp16 or bf16 activations and a weight of the same
    dtype, [N, K] with K contiguous (vLLM's UnquantizedLinearMethod weight)."""
    import torch

    return (
        x.dtype in (torch.float16, torch.bfloat16)
        and weight.dtype == x.dtype
        and weight.dim() == 2
        and x.shape[-1] == weight.shape[1]
        and weight.stride(1) == 1
    )


def linear_function(fallback, marked_only: bool = False):
    """vLLM's linear_batch_invariant(input, weight, bias) signature on this kernel; a call it does
    not take (takes), or with marked_only a weight mark_lm_head did not mark, goes to fallback,
    vLLM's own."""
    op = _custom_op()

    def linear_batch_invariant(input, weight, bias=None):
        if (marked_only and not getattr(weight, "tritonbuild_lm_head", False)) or not takes(
            input, weight
        ):
            return fallback(input, weight, bias)
        y = op(input.reshape(-1, input.shape[-1]), weight)
        y = y.reshape(*input.shape[:-1], weight.shape[0])
        return y if bias is None else y + bias

    linear_batch_invariant.tritonbuild_fallback = fallback
    return linear_batch_invariant


def lm_head_takes(gpu: str, shape: tuple, max_num_seqs: int | None) -> bool:
    """Whether the lm_head of this shape goes to the kernel on this GPU (LM_HEAD_MEASURED)."""
    limit = LM_HEAD_MEASURED.get((gpu, tuple(shape)))
    return limit is not None and max_num_seqs is not None and max_num_seqs <= limit


def _gpu_name(weight) -> str:
    import torch

    return torch.cuda.get_device_name(weight.device) if weight.device.type == "cuda" else ""


def mark_lm_head(original):
    """UnquantizedEmbeddingMethod.process_weights_after_loading, then the layer's weight marked for
    the kernel where lm_head_takes: vLLM runs it while loading the model, inside its config's context
    (vllm 0.22.0 v1/worker/gpu_worker.py:335-342, model_loader/utils.py:99-111), whose
    scheduler_config.max_num_seqs bounds the logits' rows. The mark is per model, fixed at load:
    every row count of that model goes to the same kernel."""

    def process_weights_after_loading(self, layer) -> None:
        original(self, layer)
        from vllm.config import get_current_vllm_config_or_none

        config = get_current_vllm_config_or_none()
        seqs = config.scheduler_config.max_num_seqs if config is not None else None
        gpu, shape = _gpu_name(layer.weight), tuple(layer.weight.shape)
        if lm_head_takes(gpu, shape, seqs):
            layer.weight.tritonbuild_lm_head = True
            _log.info(
                "tritonbuild: batch-invariant fp16/bf16 linear for the lm_head %s (max_num_seqs %s, "
                "%s)",
                "x".join(map(str, shape)),
                seqs,
                gpu,
            )

    process_weights_after_loading.tritonbuild_original = original
    return process_weights_after_loading


def install() -> None:
    """Put the kernel under vLLM's unquantized linears in batch-invariant mode: the module global
    linear_batch_invariant that UnquantizedLinearMethod.apply calls (vllm 0.22.0
    vllm/model_executor/layers/linear.py:21-22 imports it by name, :226-227 calls it when
    VLLM_BATCH_INVARIANT is set on a CUDA-like platform); and under the lm_head where measured
    faster (mark_lm_head): vocab_parallel_embedding.py's own global of that name, which
    UnquantizedEmbeddingMethod.apply calls (:19-21, :73-74). Once per process."""
    from vllm.model_executor.layers import linear, vocab_parallel_embedding

    current = linear.linear_batch_invariant
    if getattr(current, "tritonbuild_fallback", None) is None:
        linear.linear_batch_invariant = linear_function(current)
        _log.info(
            "tritonbuild: batch-invariant fp16/bf16 linear (%s) for the unquantized linears "
            "(VLLM_BATCH_INVARIANT)",
            OP_NAME,
        )
    current = vocab_parallel_embedding.linear_batch_invariant
    if getattr(current, "tritonbuild_fallback", None) is None:
        vocab_parallel_embedding.linear_batch_invariant = linear_function(current, marked_only=True)
        method = vocab_parallel_embedding.UnquantizedEmbeddingMethod
        method.process_weights_after_loading = mark_lm_head(method.process_weights_after_loading)
