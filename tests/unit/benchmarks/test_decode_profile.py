"""benchmarks/vllm/decode_profile.py's summary of a trace's kernels (the profiling itself runs on a GPU with vLLM)."""

from __future__ import annotations

import sys
import types

import pytest

from benchmarks.vllm import decode_profile as profile


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
def test_kernels_are_named_by_what_they_do(name, want):
    assert profile.category(name) == want


def test_per_step_sums_each_category_and_names_the_top_kernels():
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


class _LLM:
    """Answers like vLLM's LLM.generate (RequestOutput.outputs[0] with token_ids and per-position
    {token id: Logprob}); the probe's last log-prob moved by `shift` when it shares the batch."""

    def __init__(self, shift: float):
        self.shift, self.batches = shift, []

    def generate(self, prompts, params, use_tqdm):
        self.batches.append(len(prompts))
        ids = [7, 8, 9]
        logprobs = [-0.5, -0.25, -0.125 + (self.shift if len(prompts) > 1 else 0.0)]
        positions = [
            {t: types.SimpleNamespace(logprob=lp)} for t, lp in zip(ids, logprobs, strict=True)
        ]
        completion = types.SimpleNamespace(token_ids=ids, logprobs=positions)
        return [types.SimpleNamespace(outputs=[completion]) for _ in prompts]


@pytest.mark.parametrize(("shift", "identical"), [(0.0, True), (2.0**-20, False)])
def test_alone_vs_amid_compares_the_probes_log_probs_bit_for_bit(monkeypatch, shift, identical):
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=lambda **kw: kw))
    llm = _LLM(shift)
    out = profile.alone_vs_amid(llm, tokens=3, others=63)
    assert llm.batches == [1, 64]
    assert out == {"others": 63, "ids_identical": True, "logprobs_identical": identical}
