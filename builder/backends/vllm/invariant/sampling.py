"""Top-k / top-p filtering that does not change with the batch, for vLLM's batch-invariant mode.

Why: vLLM 0.22 filters a request's logits with one of two algorithms chosen by the batch's row count
(vllm/v1/sample/ops/topk_topp_sampler.py:321-322: the Triton pivot search of topk_topp_triton.py from
8 rows, the sort-based apply_top_k_top_p_pytorch below; facts: tests/contracts/facts/vllm_plugin.json
"sampling"). Which tokens a seeded request may draw therefore depended on how many requests shared its
step: alone (one row) it took the sort, amid 63 others the pivot search. install() gives every module
that calls apply_top_k_top_p by its module-global name the sort path at every row count (its sort,
softmax, cumsum and mask work row by row). What vLLM does after the filter (softmax, the exponential
race with the request's own generator, argmax) is untouched.

It never imports tritonbuild: the wheel carries it beside the plugin, whose register() calls
install() in batch-invariant mode.
"""

import logging
import sys

# vLLM 0.22's modules that import apply_top_k_top_p by name (facts: "sampling"): the v1 sampler, the
# rejection sampler, model runner v2's sampling states. One imported after install() takes the
# replacement from the v1 sampler's module; none is imported for it (start-up work for every process)
CALLERS = (
    "vllm.v1.sample.ops.topk_topp_sampler",
    "vllm.v1.sample.rejection_sampler",
    "vllm.v1.worker.gpu.sample.states",
)

_log = logging.getLogger("vllm.tritonbuild_invariant")


def top_k_top_p_function(sort_path, fallback):
    """vLLM's apply_top_k_top_p(logits, k, p) taking sort_path (apply_top_k_top_p_pytorch) whatever the
    number of rows; fallback, the function it replaces, is kept on it."""

    def apply_top_k_top_p(logits, k, p):
        if k is None and p is None:
            return logits
        return sort_path(logits, k, p)

    apply_top_k_top_p.tritonbuild_fallback = fallback
    return apply_top_k_top_p


def install() -> None:
    """Replace apply_top_k_top_p in each of CALLERS loaded so far (once per process)."""
    from vllm.v1.sample.ops import topk_topp_sampler as sampler

    current = sampler.apply_top_k_top_p
    if getattr(current, "tritonbuild_fallback", None) is not None:
        return
    replacement = top_k_top_p_function(sampler.apply_top_k_top_p_pytorch, current)
    replaced = []
    for name in CALLERS:
        module = sys.modules.get(
            name
        )  # the v1 sampler's is, just above; the others if already loaded
        if getattr(module, "apply_top_k_top_p", None) is current:
            module.apply_top_k_top_p = replacement
            replaced.append(name.rsplit(".", 1)[-1])
    _log.info(
        "tritonbuild: top-k/top-p filtered by sorting at every batch size in %s (VLLM_BATCH_INVARIANT)",
        ", ".join(replaced),
    )
