"""benchmarks/vllm/decode_profile.py's summary of a trace's kernels (the profiling itself runs on a GPU with vLLM)."""

from __future__ import annotations

import json
import sys
import types

import pytest

from benchmarks.vllm import decode_profile as profile

# Kernel names as torch's profiler gave them on an H100 (vLLM 0.22.0, torch 2.11.0+cu130; the INT4 invariant and
# default models, docs/runs/2026-12-07-decode-profile-h100.json's top_kernels; long names cut where it cut them)
FA3 = (
    "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm"
    "90<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<"
)
MACHETE = (
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
    "machete::Mac"
)


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("_w4a16", "linear_int4_invariant"),
        ("_linear16", "linear_fp16_invariant"),
        (MACHETE, "linear_int4_default"),
        ("nvjet_sm90_hsh_384x8_64x4_2x1_v_bz_TNT", "linear_fp16_library"),
        ("matmul_kernel_persistent", "linear_fp16_vllm_batch_invariant"),
        (FA3, "attention"),
        (
            "void flash::prepare_varlen_num_blocks_kernel<1, false>(int, int, int, int const*, int const*",
            "attention",
        ),
        (
            "void cutlass::device_kernel<flash::FlashAttnFwdCombine<cute::tuple<cute::C<8>, cute::C<128> >, 5",
            "attention",
        ),
        ("triton_red_fused_fused_add_rms_norm_w4a16_invariant_2", "norm"),
        ("triton_red_fused_fused_add_rms_norm_machete_mm_0", "norm"),
        ("triton_red_fused__to_copy_embedding_rms_norm_w4a16_invariant_0", "norm"),
        ("triton_poi_fused_mul_silu_slice_w4a16_invariant_1", "activation"),
        ("triton_poi_fused_machete_mm_mul_silu_slice_1", "activation"),
        ("triton_poi_fused_3", "inductor_fused_other"),
        (
            "void vllm::reshape_and_cache_flash_kernel<unsigned short, unsigned short, (vllm::Fp8",
            "kv_cache_write",
        ),
        (
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsig",
            "sampling_logits",
        ),
        ("_log_softmax_kernel", "sampling_logits"),
        ("Memset (Device)", "copy_fill"),
        ("Memcpy HtoD (Pinned -> Device)", "copy_fill"),
        ("_compute_slot_mapping_kernel", "other"),
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


def test_a_written_profile_is_summed_again_by_the_categories_as_they_are_now(tmp_path):
    """The 2026-12-07 H100 profiles were written with categories that called FlashAttention and the Inductor-fused
    norms linears; record() re-sums their top kernels (what they leave out of the GPU's time named as such)."""
    run = {
        "streams": 1,
        "steps": 64,
        "wall_ms_per_step": 3.5,
        "gpu_ms_per_step": 0.4,
        "gpu_busy_fraction": 0.1,
    }
    run["top_kernels"] = [
        {
            "name": "_w4a16",
            "category": "linear_int4_invariant",
            "calls_per_step": 128.0,
            "us_per_step": 200.0,
        },
        {
            "name": FA3,
            "category": "linear_fp16_library",
            "calls_per_step": 32.0,
            "us_per_step": 100.0,
        },
        {
            "name": "triton_red_fused_fused_add_rms_norm_w4a16_invariant_2",
            "category": "linear_int4_default",
            "calls_per_step": 31.0,
            "us_per_step": 60.0,
        },
    ]
    doc = {
        "model_dir": "/tmp/vw/OUT8-invariant/m-invariant",
        "invariant": True,
        "gpu": "NVIDIA H100 80GB HBM3",
    }
    (tmp_path / "p.json").write_text(
        json.dumps(doc | {"runs": [run], "alone_vs_amid_63": {"ids_identical": True}})
    )
    out = profile.record([tmp_path / "p.json"])
    [model] = out["models"]
    assert model["model"] == "m-invariant" and model["alone_vs_amid_63"] == {"ids_identical": True}
    assert model["runs"][0]["per_step_us"] == pytest.approx(
        {
            "linear_int4_invariant": 200.0,
            "attention": 100.0,
            "norm": 60.0,
            "not_in_top_kernels": 40.0,
        }
    )
