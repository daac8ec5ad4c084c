"""benchmarks/vllm/linear16_lm_head.py's summary and its rule for putting the kernel at the lm_head (the timing runs on
a GPU)."""

from __future__ import annotations

import pytest

from benchmarks.vllm import linear16_lm_head as lm_head


def test_per_m_the_kernel_is_judged_against_vllms_linear_and_cublas():
    times = {
        1: {"fp16_invariant": 0.40, "fp16_vllm_invariant": 0.531, "fp16_cublas": 0.352},
        64: {"fp16_invariant": 0.45, "fp16_vllm_invariant": 0.424, "fp16_cublas": 0.375},
    }
    out = lm_head.summarize(times, "NVIDIA H100 80GB HBM3")
    # 128,256 x 4,096 fp16 weights (1.05 GB) at the H100's 3.35 TB/s: 0.3137 ms
    assert out[1]["bandwidth_fraction"] == pytest.approx(128256 * 4096 * 2 / 3.35e12 * 1e3 / 0.40)
    assert out[1]["vllm_over_kernel"] == pytest.approx(0.531 / 0.40)
    assert out[64]["cublas_over_kernel"] == pytest.approx(0.375 / 0.45)
    # faster at one row, slower at 64: the kernel cannot change with M, so it does not take the lm_head
    assert lm_head.no_slower_than_vllm(out) is False
    times[64]["fp16_invariant"] = 0.42
    assert lm_head.no_slower_than_vllm(lm_head.summarize(times, "NVIDIA H100 80GB HBM3")) is True


def test_a_kernel_that_could_not_launch_or_no_vllm_leaves_the_decision_open():
    times = {1: {"fp16_invariant": "cannot launch: shared memory", "fp16_cublas": 0.35}}
    out = lm_head.summarize(times, "NVIDIA H200")
    assert out[1]["bandwidth_fraction"] is None and out[1]["vllm_over_kernel"] is None
    assert lm_head.no_slower_than_vllm(out) is None
    unknown = lm_head.summarize({1: {"fp16_invariant": 0.4, "fp16_cublas": 0.35}}, "some GPU")
    assert unknown[1]["bandwidth_fraction"] is None and lm_head.no_slower_than_vllm(unknown) is None
