"""The batch-invariant fp16/bf16 linear (backends/vllm/invariant/linear16.py), run on the CPU by Triton's interpreter
(TRITON_INTERPRET=1) at small shapes: it computes x @ W.T within fp16 / bf16 rounding of a float64 reference, and a
row's bits do not depend on the rows beside it (rows alone vs in calls of several row counts), for each kind of
tile: one K slice, a K split whose slices the kernel adds, column and K counts that are not whole tiles. On the GPU
the same checks run at Llama-3-8B's shapes in benchmarks/vllm/linear16_bench.py."""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import types

import pytest

from tests.unit.backends.fake_vllm_sampler import fake_sampler_modules
from tests.unit.backends.triton_interpreter import fixed_order_dot
from tritonbuild.backends.vllm.invariant import wheel as invariant

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
pytest.importorskip(
    "triton", reason="triton (the kernel's compiler; its interpreter runs it on the CPU)"
)
pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available(),
    reason="triton imported without its interpreter and no GPU here",
)
SOURCE = invariant.PLUGIN_SOURCE.with_name("linear16.py")
DTYPES = [torch.float16, torch.bfloat16]
# fp16 keeps 11 significant bits, bf16 8: the output's rounding, with room for fp32 sums of K products
TOLERANCE = {torch.float16: 2**-9, torch.bfloat16: 2**-6}


@pytest.fixture(autouse=True)
def _fixed_order_dot(monkeypatch):
    fixed_order_dot(monkeypatch)


def _module():
    """A fresh copy of the module (its TILES changed by a test stay there)."""
    spec = importlib.util.spec_from_file_location("tritonbuild_linear16_test", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _layer(n: int, k: int, rows: int, dtype, seed: int = 0):
    """x [rows, K] and W [N, K] whose products cancel: the second half of K repeats the first half's x against
    nearly the negated weights, so each output is small against the sums it is made of. Their fp32 rounding then
    reaches the output's bits: a reduction order that changed with the row count would show in the rows' bits
    (with independent random values an fp32 sum in another order rounds to the same fp16 in most elements)."""
    gen = torch.Generator().manual_seed(seed)
    half = k // 2
    w = torch.randn((n, k), generator=gen) * 0.05
    w[:, half : 2 * half] = -w[:, :half] + torch.randn((n, half), generator=gen) * 2e-4
    x = torch.randn((rows, k), generator=gen) * 4
    x[:, half : 2 * half] = x[:, :half]
    return x.to(dtype), w.to(dtype)


def _close(y, x, w):
    """Within the dtype's rounding of the float64 product of the same fp16 / bf16 values."""
    want = x.double() @ w.double().T
    assert y.shape == want.shape and y.dtype == x.dtype
    err = (y.double() - want).abs().max().item()
    assert err <= TOLERANCE[x.dtype] * want.abs().max().item(), err


def _bits(y):
    return y.view(torch.int16)


TILES = {
    "one-slice": (16, 16, 32, 4, 2, 1),
    "split-k-2": (16, 32, 32, 4, 2, 2),
    "split-k-3-uneven": (16, 16, 32, 4, 2, 3),  # 128 / 3: slices of 64, the last one empty
    "32-rows-k-steps-of-16": (32, 16, 16, 4, 2, 4),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("tiles", list(TILES.values()), ids=list(TILES))
def test_a_rows_bits_do_not_depend_on_the_rows_beside_it(tiles, dtype):
    """48 columns (not whole 32-column tiles under split-k-2), K 128; rows 1 .. 20 (not whole row tiles)."""
    module = _module()
    n, k = 48, 128
    module.TILES[(n, k)] = tiles
    x, w = _layer(n, k, 20, dtype)
    _close(module.linear16(x, w), x, w)
    alone = torch.cat([module.linear16(x[i : i + 1], w) for i in range(x.shape[0])])
    _close(alone, x, w)
    for m in (2, 3, 17, 20):
        assert torch.equal(_bits(module.linear16(x[:m], w)), _bits(alone[:m])), m


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_k_not_a_whole_number_of_steps_is_read_as_zeros_past_its_end(dtype):
    """K 200 with 64-wide steps and 2 slices of 128: the second slice holds 72 of K, its last step 8; the product
    and the rows' invariance hold."""
    module = _module()
    n, k = 40, 200
    module.TILES[(n, k)] = (16, 16, 64, 4, 2, 2)
    assert module.k_slice_for(k, 64, 2) == 128
    x, w = _layer(n, k, 9, dtype, seed=1)
    y = module.linear16(x, w)
    _close(y, x, w)
    assert torch.equal(_bits(y[4:5]), _bits(module.linear16(x[4:5], w)))


def test_the_default_tiles_compute_the_product():
    module = _module()
    x, w = _layer(64, 384, 5, torch.float16, seed=2)
    assert (64, 384) not in module.TILES
    _close(module.linear16(x, w), x, w)


def test_split_k_reduced_in_the_kernel_leaves_its_tile_counters_at_zero():
    """The tile's last program to finish adds the slices and sets the tile's counter back to 0, so the next call
    (a CUDA-graph replay of the same launch included) starts from 0 and still adds every slice."""
    module = _module()
    module.TILES[(32, 256)] = (16, 16, 32, 4, 2, 4)
    x, w = _layer(32, 256, 5, torch.float16, seed=3)
    first = module.linear16(x, w)
    assert module._LOCKS and all(not t.any() for held in module._LOCKS.values() for t in held)
    second = module.linear16(x, w)
    assert torch.equal(_bits(first), _bits(second))
    _close(first, x, w)


def test_tiles_depend_on_the_layer_shape_only():
    module = _module()
    module.TILES[(4096, 14336)] = (16, 64, 256, 4, 4, 8)
    assert module.tiles_for(4096, 14336) == (16, 64, 256, 4, 4, 8)
    assert module.k_slice_for(14336, 256, 8) * 8 == 14336  # whole steps: no masks
    assert module.tiles_for(4096, 4096 + 128) == module.DEFAULT_TILES  # a shape without a row
    for (
        n,
        k,
    ), tiles in module.TILES.items():  # the recorded rows: whole steps per slice, taken as they are
        assert (
            module.tiles_for(n, k) == tiles
            and module.k_slice_for(k, tiles[2], tiles[5]) * tiles[5] == k
        )
    # a narrow layer: the step no wider than K, each slice at least one step
    assert module.tiles_for(64, 48)[2] == 32 and module.tiles_for(64, 48)[5] == 1


def test_a_weight_it_does_not_take_is_refused_not_misread():
    module = _module()
    x, w = _layer(32, 64, 3, torch.float16)
    with pytest.raises(ValueError, match="weight"):
        module.linear16(x, w.to(torch.bfloat16))
    with pytest.raises(ValueError, match="weight"):
        module.linear16(x, w.T.contiguous().T)  # K not contiguous
    assert not module.takes(x.float(), w.float()) and not module.takes(x, w[:, :32])
    assert module.takes(x, w) and module.takes(x.bfloat16(), w.bfloat16())


def test_the_installed_function_falls_back_to_vllms_for_what_the_kernel_does_not_take():
    """vLLM's linear_batch_invariant(input, weight, bias) signature: fp32 goes to the function it replaced; fp16
    goes to the kernel (3-D input, bias added after); the bits are the kernel's."""
    module = _module()
    called = []

    def vllm_own(x, w, bias=None):
        called.append(x.dtype)
        return x @ w.T

    linear = module.linear_function(vllm_own)
    x, w = _layer(32, 64, 6, torch.float16, seed=4)
    bias = torch.randn(32).half()
    y = linear(x.view(2, 3, 64), w, bias)
    assert y.shape == (2, 3, 32) and not called
    assert torch.equal(_bits(y), _bits((module.linear16(x, w) + bias).view(2, 3, 32)))
    linear(x.float(), w.float())
    assert called == [torch.float32]


def _fake_vllm(monkeypatch, mode: bool) -> dict:
    """What the plugin's register() reaches of vLLM 0.22.0, as modules in sys.modules: vllm.envs' mode, the
    mixed-precision kernel registry and the names the W4A16 kernel class imports, and vllm.model_executor.layers.linear
    with vLLM's linear_batch_invariant and an UnquantizedLinearMethod whose apply, in batch-invariant mode, calls the
    module's global of that name, looked up per call (facts/vllm_plugin.json, unquantized_linear: linear.py:21-23
    imports it by name, :226-227 calls it)."""
    envs = types.SimpleNamespace(VLLM_BATCH_INVARIANT=mode)
    calls = []

    def vllm_linear(x, weight, bias=None):
        calls.append(tuple(x.shape))
        return x @ weight.T

    linear = types.ModuleType("vllm.model_executor.layers.linear")
    linear.linear_batch_invariant = vllm_linear

    class UnquantizedLinearMethod:
        def apply(self, layer, x, bias=None):
            if envs.VLLM_BATCH_INVARIANT:
                return vars(linear)["linear_batch_invariant"](x, layer.weight, bias)
            return x @ layer.weight.T

    linear.UnquantizedLinearMethod = UnquantizedLinearMethod
    # vocab_parallel_embedding.py imports linear_batch_invariant by name (:19-21); UnquantizedEmbeddingMethod.apply
    # calls it in batch-invariant mode (:73-74); its process_weights_after_loading runs at load (:61-65), where
    # vllm.config's get_current_vllm_config_or_none gives the engine's config
    vpe = types.ModuleType("vllm.model_executor.layers.vocab_parallel_embedding")
    vpe.linear_batch_invariant = vllm_linear

    class UnquantizedEmbeddingMethod:
        def process_weights_after_loading(self, layer) -> None:
            pass

        def apply(self, layer, x, bias=None):
            if envs.VLLM_BATCH_INVARIANT:
                return vars(vpe)["linear_batch_invariant"](x, layer.weight, bias)
            return x @ layer.weight.T

    vpe.UnquantizedEmbeddingMethod = UnquantizedEmbeddingMethod
    current = {"config": None}
    config = types.SimpleNamespace(get_current_vllm_config_or_none=lambda: current["config"])
    registry = types.SimpleNamespace(_POSSIBLE_KERNELS={})
    modules = {
        "vllm": types.SimpleNamespace(envs=envs),
        "vllm.envs": envs,
        "vllm.model_executor": types.ModuleType("vllm.model_executor"),
        "vllm.config": config,
        "vllm.model_executor.layers": types.SimpleNamespace(
            linear=linear, vocab_parallel_embedding=vpe
        ),
        "vllm.model_executor.layers.linear": linear,
        "vllm.model_executor.layers.vocab_parallel_embedding": vpe,
        "vllm.model_executor.kernels": types.ModuleType("vllm.model_executor.kernels"),
        "vllm.model_executor.kernels.linear": registry,
        "vllm.model_executor.kernels.linear.mixed_precision": types.ModuleType("mp"),
        "vllm.model_executor.kernels.linear.mixed_precision.MPLinearKernel": types.SimpleNamespace(
            MPLinearKernel=type("MPLinearKernel", (), {})
        ),
        "vllm.model_executor.parameter": types.SimpleNamespace(permute_param_layout_=None),
        "vllm.scalar_type": types.SimpleNamespace(
            scalar_types=types.SimpleNamespace(uint4b8="uint4b8")
        ),
        "vllm.platforms": types.SimpleNamespace(PlatformEnum=types.SimpleNamespace(CUDA="cuda")),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    sampler = fake_sampler_modules(monkeypatch)  # register() installs the sampling filter too
    return {
        "linear": linear,
        "vllm_linear": vllm_linear,
        "calls": calls,
        "registry": registry,
        "sampler": sampler,
        "vpe": vpe,
        "current": current,
    }


def test_in_batch_invariant_mode_the_plugin_puts_the_kernel_under_an_unquantized_layer(
    monkeypatch, caplog
):
    """register() as vLLM calls it in each process: UnquantizedLinearMethod.apply of an fp16 layer then computes with
    this kernel (its bits, each row's the same alone and amid the others), not vLLM's; registering again keeps one
    wrapper around vLLM's own; the W4A16 kernel is still put first among the mixed-precision kernels."""
    from tritonbuild.backends.vllm.invariant import linear16, plugin

    fake = _fake_vllm(monkeypatch, True)
    with caplog.at_level(logging.INFO):
        plugin.register()
        plugin.register()
    installed = fake["linear"].linear_batch_invariant
    assert installed.tritonbuild_fallback is fake["vllm_linear"]
    assert "batch-invariant fp16/bf16 linear" in caplog.text
    assert fake["registry"]._POSSIBLE_KERNELS["cuda"][0].__name__ == plugin.KERNEL_NAME
    sampler = fake["sampler"]["callers"]["vllm.v1.sample.ops.topk_topp_sampler"]
    assert sampler.apply_top_k_top_p.tritonbuild_fallback is fake["sampler"]["vllm_own"]
    x, w = _layer(48, 128, 6, torch.float16, seed=5)
    layer = types.SimpleNamespace(weight=w)
    method = fake["linear"].UnquantizedLinearMethod()
    y = method.apply(layer, x)
    assert not fake["calls"] and torch.equal(_bits(y), _bits(linear16.linear16(x, w)))
    assert torch.equal(_bits(method.apply(layer, x[2:3])), _bits(y[2:3]))
    _close(y, x, w)
    method.apply(
        types.SimpleNamespace(weight=w.float()), x.float()
    )  # what the kernel does not take: vLLM's
    assert fake["calls"] == [(6, 128)]


def test_outside_batch_invariant_mode_the_plugin_leaves_the_linears_alone(monkeypatch):
    from tritonbuild.backends.vllm.invariant import plugin

    fake = _fake_vllm(monkeypatch, False)
    plugin.register()
    assert fake["linear"].linear_batch_invariant is fake["vllm_linear"]
    assert not fake["registry"]._POSSIBLE_KERNELS
    sampler = fake["sampler"]["callers"]["vllm.v1.sample.ops.topk_topp_sampler"]
    assert sampler.apply_top_k_top_p is fake["sampler"]["vllm_own"]


def test_the_lm_head_goes_to_the_kernel_only_where_measured_faster_at_every_row_count(monkeypatch):
    """The lm_head's weight is marked at load when (GPU, shape) was measured and the engine's max_num_seqs (the
    logits' rows per step) is within what was measured: then UnquantizedEmbeddingMethod.apply computes with this
    kernel, for every row count; otherwise, and for the embedding's other weights, vLLM's own matmul."""
    from tritonbuild.backends.vllm.invariant import linear16, plugin

    fake = _fake_vllm(monkeypatch, True)
    plugin.register()
    plugin.register()  # once: one wrapper around vLLM's, one around the method's weight processing
    vpe = fake["vpe"]
    assert vpe.linear_batch_invariant.tritonbuild_fallback is fake["vllm_linear"]
    original = vpe.UnquantizedEmbeddingMethod.process_weights_after_loading.tritonbuild_original
    assert not hasattr(original, "tritonbuild_original")
    h100 = "NVIDIA H100 80GB HBM3"
    x, w = _layer(48, 128, 6, torch.float16, seed=6)
    monkeypatch.setitem(linear16.LM_HEAD_MEASURED, (h100, (48, 128)), 64)
    gpu = {"name": h100}
    monkeypatch.setattr(linear16, "_gpu_name", lambda weight: gpu["name"])
    method = vpe.UnquantizedEmbeddingMethod()
    for seqs, name, taken in ((64, h100, True), (1, h100, True), (65, h100, False), (None, h100, False),
                              (64, "NVIDIA H200", False)):  # fmt: skip
        sched = types.SimpleNamespace(max_num_seqs=seqs)
        fake["current"]["config"] = (
            None if seqs is None else types.SimpleNamespace(scheduler_config=sched)
        )
        gpu["name"] = name
        layer = types.SimpleNamespace(weight=w.clone())
        method.process_weights_after_loading(layer)
        fake["calls"].clear()
        y = method.apply(layer, x)
        assert (not fake["calls"]) is taken, (seqs, name)
        if taken:  # the kernel's bits, each row's the same alone
            assert torch.equal(_bits(y), _bits(linear16.linear16(x, w)))
            assert torch.equal(_bits(method.apply(layer, x[3:4])), _bits(y[3:4]))


def test_the_measured_lm_head_row_is_the_records():
    """LM_HEAD_MEASURED and the lm_head's tiles come from docs/runs/2026-12-07-lm-head-h100.json: its GPU and shape,
    its tiles, and the largest measured row count up to which the kernel was no slower than vLLM's at every one."""
    import json

    from tests.conftest import ROOT
    from tritonbuild.backends.vllm.invariant import linear16

    record = json.loads((ROOT / "docs/runs/2026-12-07-lm-head-h100.json").read_text())
    shape = tuple(record["shape"])
    assert {(record["machine"]["gpu"], shape): 64} == linear16.LM_HEAD_MEASURED
    assert linear16.TILES[shape] == tuple(record["tiles"]) and linear16.tiles_for(*shape) == tuple(
        record["tiles"]
    )
    faster = [
        int(m)
        for m, row in record["kernel"].items()
        if row["fp16_invariant_ms"] <= row["fp16_vllm_invariant_ms"]
    ]
    slower = [int(m) for m in record["kernel"] if int(m) not in faster]
    assert max(faster) == 64 < min(slower) and all(m <= 64 for m in faster)
    assert all(record["invariance_checks"].values())
    assert linear16.lm_head_takes(record["machine"]["gpu"], shape, 64)
    assert not linear16.lm_head_takes(record["machine"]["gpu"], shape, 65)
    assert not linear16.lm_head_takes("NVIDIA H200", shape, 1) and not linear16.lm_head_takes(
        "", shape, 1
    )
