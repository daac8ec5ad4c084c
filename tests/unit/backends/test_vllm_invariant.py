"""The batch-invariant W4A16 kernel of the vLLM plugin (backends/vllm/invariant/w4a16.py), run on the CPU by
Triton's interpreter (TRITON_INTERPRET=1) on weights packed by the project's compressed-tensors packer: it computes
x @ dequant(W).T, and a row's bits do not depend on the rows beside it. On the GPU the same checks run at
Llama-3-8B's shapes in benchmarks/vllm/w4a16_bench.py (docs/runs/*-llm-determinism-h200.json)."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from benchmarks.vllm import tiny_llama
from tests.unit.backends.triton_interpreter import fixed_order_dot
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
    fixed_order_dot(monkeypatch)


def _plugin():
    spec = importlib.util.spec_from_file_location(
        "tritonbuild_vllm_invariant_test", invariant.KERNEL_SOURCE
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


def _matmul(plugin, x, packed, scale, group):
    w, s = plugin.prepare_weights(packed, scale, group)
    return plugin.w4a16_matmul(x, w, s, group)


def _close(got, x, dense):
    want = x.float().numpy() @ dense.T
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * np.abs(want).max())


def test_kernel_computes_x_times_the_dequantized_weight(layer):
    x, packed, scale, dense, group = layer
    _close(_matmul(_plugin(), x, packed, scale, group).float().numpy(), x, dense)


@pytest.mark.parametrize(
    "tiles",
    [
        None,
        (16, 16, 128, 4, 2, 1),
        (16, 32, 128, 4, 2, 2),
        (32, 16, 256, 4, 2, 1),
        (16, 16, 128, 4, 2, 2),
        (64, 64, 128, 4, 3, 2),
    ],
    ids=["default", "one-slice", "split-k", "256-k-steps-32-rows", "split-k-16-columns", "64x64"],
)
def test_a_rows_bits_do_not_depend_on_the_rows_beside_it(layer, tiles):
    x, packed, scale, dense, group = layer
    plugin = _plugin()
    if tiles is not None:
        plugin.TILES[(packed.shape[0], x.shape[1])] = tiles
    packed, scale = plugin.prepare_weights(packed, scale, group)
    _close(plugin.w4a16_matmul(x, packed, scale, group).float().numpy(), x, dense)
    alone = torch.cat(
        [plugin.w4a16_matmul(x[i : i + 1], packed, scale, group) for i in range(x.shape[0])]
    )
    for m in (2, 3, 17, 40):
        batch = plugin.w4a16_matmul(x[:m], packed, scale, group)
        assert torch.equal(batch.view(torch.int16), alone[:m].view(torch.int16)), m


@pytest.mark.parametrize("group", [32, 64, 256, -1], ids=["g32", "g64", "g256", "channelwise"])
def test_every_group_size_gets_its_own_scales(group):
    """Groups of 32 and 64 end inside a 128-wide step (their scales applied there), 256 spans two
    steps, -1 (one scale per output, vLLM's group_size -1) the whole of K: the product and the rows'
    invariance hold for each."""
    rng = np.random.default_rng(2)
    n, k = 40, 512
    g = k if group == -1 else group
    q, scale = tiny_llama.quantize_int4((rng.standard_normal((n, k)) * 0.05).astype(np.float16), g)
    packed = tiny_llama.pack_int4(q)
    dense = tiny_llama.dequantize(packed, scale, (n, k), g)
    x = torch.from_numpy(rng.standard_normal((9, k)).astype(np.float16))
    plugin = _plugin()
    plugin.TILES[(n, k)] = (16, 16, 256, 4, 2, 2)
    got = _matmul(plugin, x, torch.from_numpy(packed), torch.from_numpy(scale), g)
    _close(got.float().numpy(), x, dense)
    alone = _matmul(plugin, x[4:5], torch.from_numpy(packed), torch.from_numpy(scale), g)
    assert torch.equal(got[4:5].view(torch.int16), alone.view(torch.int16))


def test_tiles_depend_on_the_layer_shape_only():
    plugin = _plugin()
    assert plugin.tiles_for(4096, 4096, 128) == plugin.tiles_for(4096, 4096, 128)
    block_m, block_n, block_k, _, _, split = plugin.tiles_for(4096, 4096, 32)
    assert block_k in (128, 256) and block_m >= 16 and block_n >= 16
    assert (4096 // split) % block_k == 0
    plugin.TILES[(4096, 4096 + 128 * 3)] = (16, 64, 256, 4, 3, 4)
    *_, block_k, _, _, split = plugin.tiles_for(4096, 4096 + 128 * 3, 128)
    k_slice = (4096 + 128 * 3) // split  # slices of whole groups and whole steps only
    assert (4096 + 128 * 3) % split == 0 and k_slice % 128 == 0 and k_slice % block_k == 0


def test_a_layer_the_kernel_cannot_take_is_named_not_misread():
    plugin = _plugin()
    assert plugin.supported(4096, 128) is None and plugin.supported(14336, 32) is None
    assert "K 4160" in plugin.supported(4160, 32) and "group size 16" in plugin.supported(4096, 16)


def test_the_kernel_registers_as_a_torch_custom_op():
    """vLLM compiles the model with torch.compile: the kernel is one opaque custom op, whose schema torch infers from
    the annotations. String annotations (from __future__ import annotations) made torch refuse it: every invariant
    vLLM model failed to load on the H200 ('infer_schema(func): Unsupported type annotation torch.Tensor')."""
    from tritonbuild.backends.vllm.invariant import plugin

    op = plugin._custom_op()
    assert "tritonbuild::w4a16_invariant" in str(op._qualname if hasattr(op, "_qualname") else op)


def test_split_k_reduced_in_the_kernel_leaves_its_tile_counters_at_zero(layer):
    """The tile's last program to finish adds the slices; it sets the tile's counter back to 0,
    so the next call (a CUDA-graph replay of the same launch included) starts from 0 and still adds
    every slice: two calls in a row give the same bits and the product."""
    x, packed, scale, dense, group = layer
    plugin = _plugin()
    plugin.TILES[(packed.shape[0], x.shape[1])] = (16, 16, 128, 4, 2, 2)
    packed, scale = plugin.prepare_weights(packed, scale, group)
    first = plugin.w4a16_matmul(x[:5], packed, scale, group)
    assert all(not t.any() for held in plugin._LOCKS.values() for t in held)
    second = plugin.w4a16_matmul(x[:5], packed, scale, group)
    assert torch.equal(first.view(torch.int16), second.view(torch.int16))
    _close(first.float().numpy(), x[:5], dense)


def test_weights_not_in_the_kernels_layout_are_refused_not_misread(layer):
    """The kernel reads the words prepare_weights lays out ([N rounded up to 64, K/8]) and scales
    [K/G, N]: compressed-tensors' [N, K/G] scales handed over as they are would be read with the
    wrong strides."""
    x, packed, scale, _, group = layer
    plugin = _plugin()
    words, scales = plugin.prepare_weights(packed, scale, group)
    with pytest.raises(ValueError, match="prepare_weights"):
        plugin.w4a16_matmul(x[:2], words, scale, group)
    with pytest.raises(ValueError, match="prepare_weights"):
        plugin.w4a16_matmul(x[:2], packed, scales, group)


def test_each_plane_is_q_minus_8_in_the_activations_dtype():
    """The dequantization reads q - 8 off a float's bits (no int-to-float conversion): plane i of a
    block of 16-bit halves (_planes_order) must give exactly what the conversion gives, q - 8 in
    fp16, for all 16 values, at K offsets 32i .. 32i + 31. (Triton's interpreter runs the planes'
    Triton operations; on the GPU fp16 runs the same values in PTX: `w4a16_record.py --ptx-check`
    found 0 elements differing between the two, docs/runs/2026-12-06-w4a16-ptx-vs-triton-ops-h100.json.
    bf16: Triton 3.6's interpreter computes bf16 arithmetic on the raw bits, 129 - 136 gives nan;
    w4a16_bench checks the bf16 path on the GPU.)"""
    plugin = _plugin()
    plugin._kernels()
    # the interpreter runs a nested jit function only if its module shows triton.language (the
    # plugin imports it inside _kernels; launching one of its kernels first would put it there)
    plugin.tl = tl
    rng = np.random.default_rng(1)
    n, k = 64, 128
    q = rng.integers(0, 16, (n, k))
    q[0, :16] = np.arange(16)
    q[1, 32:48] = np.arange(16)  # every value in every plane
    q[2, 64:80] = np.arange(16)
    q[3, 96:112] = np.arange(16)
    halves = plugin.planes_order(torch.from_numpy(tiny_llama.pack_int4(q.astype(np.int8) - 8)))
    out = torch.empty((4, n, 32), dtype=torch.float16)

    @triton.jit
    def planes(w_ptr, out_ptr, N: tl.constexpr):
        cols = tl.arange(0, N)
        offs = cols[:, None] * 32 + tl.arange(0, 32)[None, :]
        packed = tl.load(w_ptr + offs).to(tl.uint16, bitcast=True)
        for i in tl.static_range(4):
            w = plugin._plane(packed, i, out_ptr.dtype.element_ty, False)
            tl.store(out_ptr + i * N * 32 + offs, w)

    planes.fn.__globals__["plugin"] = plugin
    planes[(1,)](halves.view(torch.int16), out, N=n)
    want = torch.from_numpy(q - 8).to(torch.float16).reshape(n, 4, 32).transpose(0, 1)
    assert torch.equal(out.view(torch.int16), want.contiguous().view(torch.int16))


def _decode_planes(halves: np.ndarray, n: int, k: int) -> np.ndarray:
    """The nibbles q[N, K] of _planes_order's bytes, read by its definition: half (row r, K block b,
    j) at ((r // 64) * (K / 128) + b) * 2048 + (r % 64) * 32 + j holds offset 128b + 32i + j in
    bits 4i..4i+3."""
    flat = halves.view(np.uint16).reshape(-1)
    r, b, i, j = np.meshgrid(
        np.arange(n), np.arange(k // 128), np.arange(4), np.arange(32), indexing="ij"
    )
    at = ((r // 64) * (k // 128) + b) * 2048 + (r % 64) * 32 + j
    q = np.zeros((n, k), dtype=np.int64)
    q[r, 128 * b + 32 * i + j] = (flat[at].astype(np.int64) >> (4 * i)) & 0xF
    return q


def test_the_layout_holds_every_nibble_of_every_linear_of_the_tiny_model_where_the_kernel_reads_it():
    """The tiny Llama of benchmarks/vllm (its fp16 weights through the project's INT4 quantizer,
    the checkpoint vLLM loads): each linear's words in _planes_order, the layout the kernel reads
    (prepare_weights at load), decoded by the layout's definition, give back every 4-bit value;
    the rows added to reach a multiple of 64 are zero; the bytes' size is the padded [N, K/8]."""
    plugin = _plugin()
    arrays = tiny_llama.int4_tensors(tiny_llama.tensors(tiny_llama.CONFIG))
    linears = [name for name in arrays if name.endswith(".weight_packed")]
    assert len(linears) == 7 * tiny_llama.CONFIG["num_hidden_layers"]
    for name in linears:
        packed = arrays[name]
        n, k = packed.shape[0], packed.shape[1] * 8
        words = plugin.planes_order(torch.from_numpy(packed)).numpy()
        padded = -(-n // 64) * 64
        assert words.shape == (padded, k // 8) and words.dtype == np.int32, name
        q = _decode_planes(words, padded, k)
        assert np.array_equal(q[:n], tiny_llama.unpack_int4(packed, (n, k)) + 8), name
        assert not q[n:].any(), name
