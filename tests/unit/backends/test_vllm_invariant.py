"""The batch-invariant W4A16 kernel of the vLLM plugin (backends/vllm/invariant/plugin.py), run on the CPU by
Triton's interpreter (TRITON_INTERPRET=1) on weights packed by the project's compressed-tensors packer: it computes
x @ dequant(W).T, and a row's bits do not depend on the rows beside it. On the GPU the same checks run at
Llama-3-8B's shapes in benchmarks/vllm/w4a16_bench.py (docs/runs/*-llm-determinism-h200.json)."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from benchmarks.vllm import tiny_llama
from tritonbuild.backends.vllm.invariant import wheel as invariant

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
triton = pytest.importorskip(
    "triton", reason="triton (the kernel's compiler; its interpreter runs it on the CPU)"
)
tl = pytest.importorskip("triton.language")
pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available(),
    reason="triton imported without its interpreter and no GPU here",
)


@pytest.fixture(autouse=True)
def _fixed_order_dot(monkeypatch):
    """The interpreter's tl.dot as one fixed-order reduction over K, the same for every row of the tile (as the
    GPU's MMA is). Upstream's interpreter hands it to numpy's matmul, i.e. OpenBLAS's sgemm, whose Haswell and Zen
    kernels give a row other bits at another position inside the tile (measured: the same x row and weights, row 0
    of a tile alone vs row 15 of a full one, differed in one element with OPENBLAS_CORETYPE=Haswell, the core type
    portable numerics pins and every AVX2 machine gets): that is the CPU BLAS, not the kernel under test."""
    interpreter = pytest.importorskip("triton.runtime.interpreter")

    def dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        out = d.data.dtype
        products = a.data.astype(out)[:, :, None] * b.data.astype(out)[None, :, :]
        acc = np.zeros(d.data.shape, dtype=out)
        for k in range(products.shape[1]):
            acc += products[:, k, :]
        return interpreter.TensorHandle(acc + d.data, d.dtype.scalar)

    if os.environ.get("TRITON_INTERPRET") == "1":
        monkeypatch.setattr(interpreter.InterpreterBuilder, "create_dot", dot)


def _plugin():
    spec = importlib.util.spec_from_file_location(
        "tritonbuild_vllm_invariant_test", invariant.PLUGIN_SOURCE
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def layer():
    rng = np.random.default_rng(0)
    n, k, group = 48, 256, 128
    w = (rng.standard_normal((n, k)) * 0.05).astype(np.float16)
    q, scale = tiny_llama.quantize_int4(w, group)
    packed = tiny_llama.pack_int4(q)
    dense = tiny_llama.dequantize(packed, scale, (n, k), group)
    x = (rng.standard_normal((40, k))).astype(np.float16)
    return torch.from_numpy(x), torch.from_numpy(packed), torch.from_numpy(scale), dense, group


def test_kernel_computes_x_times_the_dequantized_weight(layer):
    x, packed, scale, dense, group = layer
    got = _plugin().w4a16_matmul(x, packed, scale, group).float().numpy()
    want = x.float().numpy() @ dense.T
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * np.abs(want).max())


@pytest.mark.parametrize(
    "tiles",
    [
        None,
        (16, 32, 128, 4, 4, 1, 0, 0, 0, 0),
        (16, 16, 64, 4, 4, 2, 0, 1, 0, 0),
        (16, 16, 64, 4, 4, 2, 0, 1, 1, 0),
        (16, 32, 128, 4, 4, 1, 1, 1, 0, 0),
        (16, 16, 64, 4, 4, 2, 1, 1, 1, 0),
        (32, 16, 64, 4, 4, 2, 1, 0, 0, 0),
        (16, 16, 64, 4, 4, 2, 1, 1, 1, 1),
        (16, 32, 128, 4, 4, 1, 0, 0, 0, 1),
    ],
    ids=[
        "default",
        "one-slice",
        "split-k-sum-kernel",
        "split-k-reduced-in-kernel",
        "swapped",
        "swapped-split-k-reduced-in-kernel",
        "swapped-32-rows-split-k-sum-kernel",
        "swapped-split-k-reduced-in-kernel-pairs",
        "one-slice-pairs",
    ],
)
def test_a_rows_bits_do_not_depend_on_the_rows_beside_it(layer, tiles):
    x, packed, scale, dense, group = layer
    plugin = _plugin()
    if tiles is not None:
        plugin.TILES[(packed.shape[0], x.shape[1])] = tiles
        packed, scale = plugin.prepare_weights(packed, scale, group)
        got = plugin.w4a16_matmul(x, packed, scale, group).float().numpy()
        np.testing.assert_allclose(
            got, x.float().numpy() @ dense.T, rtol=2e-2, atol=2e-2 * np.abs(got).max()
        )
    alone = torch.cat(
        [plugin.w4a16_matmul(x[i : i + 1], packed, scale, group) for i in range(x.shape[0])]
    )
    for m in (2, 3, 17, 40):
        batch = plugin.w4a16_matmul(x[:m], packed, scale, group)
        assert torch.equal(batch.view(torch.int16), alone[:m].view(torch.int16)), m


def test_tiles_depend_on_the_layer_shape_only():
    plugin = _plugin()
    assert plugin.tiles_for(4096, 4096, 128) == plugin.tiles_for(4096, 4096, 128)
    block_m, block_n, block_k, _, _, split, *_ = plugin.tiles_for(4096, 4096, 32)
    assert 32 % block_k == 0 and block_m >= 16 and block_n >= 16
    assert (4096 // split) % 32 == 0
    *_, split, _, _, _, _ = plugin.tiles_for(
        4096, 4096 + 128 * 3, 128
    )  # slices of whole groups only
    assert (4096 + 128 * 3) % split == 0 and ((4096 + 128 * 3) // split) % 128 == 0


def test_the_kernel_registers_as_a_torch_custom_op():
    """vLLM compiles the model with torch.compile: the kernel is one opaque custom op, whose schema torch infers from
    the annotations. String annotations (from __future__ import annotations) made torch refuse it: every invariant
    vLLM model failed to load on the H200 ('infer_schema(func): Unsupported type annotation torch.Tensor')."""
    plugin = _plugin()
    op = plugin._custom_op()
    assert "tritonbuild::w4a16_invariant" in str(op._qualname if hasattr(op, "_qualname") else op)


def test_split_k_reduced_in_the_kernel_leaves_its_tile_counters_at_zero(layer):
    """REDUCE: the tile's last program to finish adds the slices; it sets the tile's counter back to 0,
    so the next call (a CUDA-graph replay of the same launch included) starts from 0 and still adds
    every slice: two calls in a row give the same bits and the product."""
    x, packed, scale, dense, group = layer
    plugin = _plugin()
    plugin.TILES[(packed.shape[0], x.shape[1])] = (16, 16, 64, 4, 4, 2, 1, 1, 1, 0)
    packed, scale = plugin.prepare_weights(packed, scale, group)
    first = plugin.w4a16_matmul(x[:5], packed, scale, group)
    assert all(not t.any() for held in plugin._LOCKS.values() for t in held)
    second = plugin.w4a16_matmul(x[:5], packed, scale, group)
    assert torch.equal(first.view(torch.int16), second.view(torch.int16))
    want = x[:5].float().numpy() @ dense.T
    np.testing.assert_allclose(
        first.float().numpy(), want, rtol=2e-2, atol=2e-2 * np.abs(want).max()
    )


def test_scales_not_in_the_tiles_layout_are_refused_not_misread(layer):
    """SCALES_KN tiles read [K/G, N] scales (prepare_weights transposes them): compressed-tensors'
    [N, K/G] handed over as they are would be read with the wrong strides."""
    x, packed, scale, _, group = layer
    plugin = _plugin()
    plugin.TILES[(packed.shape[0], x.shape[1])] = (16, 16, 64, 4, 4, 2, 1, 1, 1, 0)
    with pytest.raises(ValueError, match="prepare_weights"):
        plugin.w4a16_matmul(x[:2], packed, scale, group)


@pytest.mark.parametrize("pairs", [0, 1], ids=["nibble-by-nibble", "pairs"])
def test_the_weight_tile_is_q_minus_8_times_the_scale_in_the_activations_dtype(pairs):
    """The dequantization reads q - 8 off a float's bits (no int-to-float conversion): it must give
    exactly what the conversion gives, (q - 8) * scale in fp16, for all 16 values, in K order, from
    compressed-tensors' words or (PAIRS) the words _pairs_order made of them. (bf16: Triton 3.6's
    interpreter computes bf16 arithmetic on the raw bits, 129 - 136 gives nan; w4a16_bench checks
    the bf16 path on the GPU.)"""
    plugin = _plugin()
    plugin._kernels()
    # the interpreter runs a nested jit function only if its module shows triton.language (the
    # plugin imports it inside _kernels; launching one of its kernels first would put it there)
    plugin.tl = tl
    rng = np.random.default_rng(1)
    n, k = 16, 128
    q = rng.integers(0, 16, (n, k))
    q[0, :16] = np.arange(16)
    packed = torch.from_numpy(tiny_llama.pack_int4(q.astype(np.int8) - 8))
    packed = plugin._pairs_order(packed) if pairs else packed
    scale = torch.from_numpy(rng.random((n, 1)).astype(np.float16) * 0.02 + 0.001)
    x = torch.zeros((1, k), dtype=scale.dtype)
    out = torch.empty((n, k), dtype=scale.dtype)

    @triton.jit
    def tile(w_ptr, s_ptr, x_ptr, out_ptr, N: tl.constexpr, K: tl.constexpr, PAIRS: tl.constexpr):
        cols = tl.arange(0, N)
        scale = tl.load(s_ptr + cols)
        packed = tl.load(w_ptr + cols[:, None] * (K // 8) + tl.arange(0, K // 8)[None, :])
        w = plugin._weight_tile(packed, scale, x_ptr, K, PAIRS)
        tl.store(out_ptr + cols[:, None] * K + tl.arange(0, K)[None, :], w)

    tile.fn.__globals__["plugin"] = plugin
    tile[(1,)](packed, scale, x, out, N=n, K=k, PAIRS=pairs)
    want = (torch.from_numpy(q - 8).to(scale.dtype) * scale).view(torch.int16)
    assert torch.equal(out.view(torch.int16), want)


def test_pairs_order_puts_offsets_2i_and_2i_plus_1_under_one_shift_and_mask():
    """PAIRS' load-time layout: word slot s holds K offset (0, 2, 4, 6, 1, 3, 5, 7)[s], so
    (word >> 4i) & 0x000F000F is offset 2i in the low half and 2i + 1 in the high half."""
    plugin = _plugin()
    q = np.arange(16).reshape(2, 8) ^ np.array([[0], [5]])  # two words, every nibble different
    words = torch.from_numpy(tiny_llama.pack_int4(q.astype(np.int8) - 8))
    reordered = plugin._pairs_order(words).numpy().view(np.uint32)
    for row in range(2):
        for i in range(4):
            pair = (int(reordered[row, 0]) >> (4 * i)) & 0x000F000F
            assert (pair & 0xF, pair >> 16) == (q[row, 2 * i], q[row, 2 * i + 1])
