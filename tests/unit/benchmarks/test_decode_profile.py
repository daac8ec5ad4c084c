"""benchmarks/vllm/decode_profile.py's summary of a trace's kernels (the profiling itself runs on a GPU with vLLM)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def profile():
    spec = importlib.util.spec_from_file_location(
        "decode_profile", ROOT / "benchmarks" / "vllm" / "decode_profile.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("_w4a16", "linear_int4_invariant"),
        ("_linear16", "linear_fp16_invariant"),
        ("void machete::MacheteKernelTemplate<...>", "linear_int4_default"),
        ("nvjet_hsh_128x64_64x4_1x2_h_bz_coopA_NTN", "linear_fp16_library"),
        ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128>>", "attention"),
        ("_rms_norm_kernel", "norm"),
        ("void vllm::act_and_mul_kernel<c10::Half, &vllm::silu_kernel>", "activation"),
        ("void vllm::rotary_embedding_kernel<c10::Half, true>", "rotary"),
        ("_log_softmax_kernel", "sampling_logits"),
        ("void vllm::reshape_and_cache_flash_kernel", "kv_cache_write"),
        ("void at::native::vectorized_elementwise_kernel<4, FillFunctor>", "copy_fill"),
        ("some_unknown_kernel", "other"),
    ],
)
def test_kernels_are_named_by_what_they_do(profile, name, want):
    assert profile.category(name) == want


def test_per_step_sums_each_category_and_names_the_top_kernels(profile):
    kernels = [("_w4a16", 10.0)] * 8 + [("_rms_norm_kernel", 2.0)] * 4 + [("flash_fwd", 6.0)] * 2
    out = profile.summarize(kernels, steps=2, wall_s=100e-6)
    assert out["per_step_us"] == {"linear_int4_invariant": 40.0, "attention": 6.0, "norm": 4.0}
    assert out["gpu_ms_per_step"] == pytest.approx(0.05)
    assert out["wall_ms_per_step"] == pytest.approx(0.05)
    assert out["gpu_busy_fraction"] == pytest.approx(1.0)
    assert out["share"]["linear_int4_invariant"] == pytest.approx(0.8)
    top = out["top_kernels"][0]
    assert top == {
        "name": "_w4a16",
        "category": "linear_int4_invariant",
        "calls_per_step": 4.0,
        "us_per_step": 40.0,
    }
