"""The plugin's top-k / top-p filter (backends/vllm/invariant/sampling.py): in vLLM's batch-invariant mode a request's
filter no longer depends on how many requests share its step (vLLM 0.22 took the Triton pivot search from 8 rows, the
sort below: the seeded-sampling path verify measures differed alone vs amid 63 others on an H100)."""

from __future__ import annotations

import logging

import pytest
import torch

from tests.unit.backends.fake_vllm_sampler import fake_sampler_modules


@pytest.mark.parametrize("runner_v2", [True, False])
def test_every_caller_sorts_at_every_row_count(monkeypatch, caplog, runner_v2):
    from tritonbuild.backends.vllm.invariant import sampling

    fake = fake_sampler_modules(monkeypatch, runner_v2=runner_v2)
    before = fake["vllm_own"](torch.zeros(64, 10), None, torch.full((64,), 0.9))
    assert fake["calls"] == [("triton", 64)] and before.shape == (
        64,
        10,
    )  # vLLM's own: 64 rows, pivot search
    fake["calls"].clear()
    with caplog.at_level(logging.INFO):
        sampling.install()
        sampling.install()  # once per process: one wrapper
    installed = fake["callers"]["vllm.v1.sample.ops.topk_topp_sampler"].apply_top_k_top_p
    assert installed.tritonbuild_fallback is fake["vllm_own"]
    assert all(m.apply_top_k_top_p is installed for m in fake["callers"].values())
    assert len(fake["callers"]) == (3 if runner_v2 else 2)
    p = torch.full((64,), 0.9)
    for caller in fake["callers"].values():
        for rows in (1, 7, 8, 64):
            caller.apply_top_k_top_p(torch.zeros(rows, 10), None, p[:rows])
    assert {kind for kind, _ in fake["calls"]} == {"sort"}
    logits = torch.zeros(3, 10)
    assert installed(logits, None, None) is logits  # nothing to filter: as vLLM's
    assert "top-k/top-p filtered by sorting at every batch size" in caplog.text


def test_where_vllm_imports_its_filter_masks_a_row_alike_alone_and_in_a_batch(monkeypatch):
    """vLLM's own modules (where vLLM imports: its GPU runs; a CPU with vLLM 0.22.0's wheel and its pure-Python
    dependencies on the path, 2026-12-07): after install() every caller filters each row of a 64-row batch exactly
    as the row alone, top-k, top-p and both (on the GPU vLLM's own filter takes its Triton pivot search for the 64
    rows)."""
    sampler = pytest.importorskip("vllm.v1.sample.ops.topk_topp_sampler")
    import importlib

    from tritonbuild.backends.vllm.invariant import sampling

    for name in sampling.CALLERS:  # restored after the test
        module = importlib.import_module(name)
        monkeypatch.setattr(module, "apply_top_k_top_p", module.apply_top_k_top_p)
    sampling.install()
    assert all(
        importlib.import_module(name).apply_top_k_top_p is sampler.apply_top_k_top_p
        for name in sampling.CALLERS
    )
    device = "cuda" if torch.cuda.is_available() else "cpu"
    logits = (torch.randn(64, 4096, generator=torch.Generator().manual_seed(0)) * 3).to(device)
    k = torch.full((64,), 50, dtype=torch.long, device=device)
    p = torch.linspace(0.5, 0.99, 64, device=device)
    for kk, pp in ((k, None), (None, p), (k, p)):
        batch = sampler.apply_top_k_top_p(logits.clone(), kk, pp)
        assert torch.isinf(batch).any(1).all()  # every row filtered
        for i in (0, 13, 63):
            one = slice(i, i + 1)
            alone = sampler.apply_top_k_top_p(
                logits[one].clone(),
                None if kk is None else kk[one],
                None if pp is None else pp[one],
            )
            assert torch.equal(alone[0], batch[i])
