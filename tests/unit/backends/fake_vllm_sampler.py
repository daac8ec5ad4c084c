"""vLLM 0.22.0's top-k / top-p filter as the plugin's sampling.install() reaches it, as modules for sys.modules
(facts/vllm_plugin.json "sampling"): topk_topp_sampler's apply_top_k_top_p, which takes the Triton pivot search from
8 rows and the sort path below (topk_topp_sampler.py:321-325), and the two modules that import it by name."""

from __future__ import annotations

import sys
import types


def fake_sampler_modules(monkeypatch, runner_v2: bool = True) -> dict:
    calls: list[tuple[str, int]] = []

    def apply_top_k_top_p_triton(logits, k, p):
        calls.append(("triton", logits.shape[0]))
        return logits

    def apply_top_k_top_p_pytorch(logits, k, p, allow_cpu_sync=False):
        calls.append(("sort", logits.shape[0]))
        return logits

    sampler = types.ModuleType("vllm.v1.sample.ops.topk_topp_sampler")
    sampler.apply_top_k_top_p_pytorch = apply_top_k_top_p_pytorch

    def apply_top_k_top_p(logits, k, p):
        if p is None and k is None:
            return logits
        if logits.shape[0] >= 8:
            return apply_top_k_top_p_triton(logits, k, p)
        return apply_top_k_top_p_pytorch(logits, k, p)

    sampler.apply_top_k_top_p = apply_top_k_top_p
    callers = {"vllm.v1.sample.ops.topk_topp_sampler": sampler}
    for name in ("vllm.v1.sample.rejection_sampler", "vllm.v1.worker.gpu.sample.states"):
        if name.endswith("states") and not runner_v2:
            monkeypatch.setitem(sys.modules, name, None)  # import fails: a vLLM without it
            continue
        module = types.ModuleType(name)
        module.apply_top_k_top_p = apply_top_k_top_p  # from ... import apply_top_k_top_p
        callers[name] = module
    modules = {
        "vllm.v1": types.ModuleType("vllm.v1"),
        "vllm.v1.sample": types.ModuleType("vllm.v1.sample"),
        "vllm.v1.sample.ops": types.SimpleNamespace(topk_topp_sampler=sampler),
        **callers,
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return {"callers": callers, "vllm_own": apply_top_k_top_p, "calls": calls}
