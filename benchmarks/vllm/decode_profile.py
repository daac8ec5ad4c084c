"""Where a decode step's GPU time goes (issue 45, item 3): one built vLLM model of a tritonbuild repository run by
vLLM's offline engine in this process under torch's profiler, default or invariant as its repository says, and
its kernels' time per decode step summed by what they do (the W4A16 and fp16 linears, attention, norms, the
activation, rotary, sampling and log-softmax, copies, other), with the step's wall time.

    python3 benchmarks/vllm/decode_profile.py /models/llama-3-8b-int4-invariant --streams 1,64 --tokens 64 \
        [--invariant] --out profile.json

The model's engine args are its model.json's (what Triton's vLLM backend hands AsyncEngineArgs); --invariant sets
VLLM_BATCH_INVARIANT=1 as `tritonbuild serve` does for `serving.determinism: invariant` (the plugin wheel must be
installed into this Python, h200_8b.sh's PLUGIN_PREINSTALL=1). Per stream count: one warm-up generation, then one
profiled generation of --tokens tokens per stream after a 4-token prompt, so decode steps dominate the trace;
per step = the trace's kernel time / tokens. Kernels captured in CUDA graphs are traced one by one (CUPTI).

    python3 benchmarks/vllm/decode_profile.py record profile-8b-*.json > docs/runs/DATE-decode-profile-GPU.json

joins profiles into one record, their top kernels summed again by the categories here (see recategorized).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

# What a kernel does, by its name: the first pattern that matches names it (case-insensitive). Ordered by the names
# an H100 run printed (docs/runs/2026-12-07-decode-profile-h100.json): Inductor's fused kernels (triton_red_/
# triton_poi_/triton_per_) take the names of every op in the fused region, so "..._rms_norm_w4a16_invariant" is
# the residual add + RMSNorm fed by the W4A16 linear, not the linear; FlashAttention 3's kernels are CUTLASS
# kernels ("cutlass::device_kernel<flash::...>"); vLLM 0.22's batch-invariant matmul (batch_invariant.py
# matmul_kernel_persistent, which aten::mm becomes in that mode) serves what stays unquantized: lm_head. Since the
# plugin takes the 8B lm_head on an H100 (max_num_seqs <= 64: linear16.LM_HEAD_MEASURED), there it is _linear16: in an
# INT4 model's profile linear_fp16_invariant is then the lm_head alone.
CATEGORIES = [
    ("linear_int4_invariant", r"^_w4a16"),  # the plugin's Triton kernels, by their function names
    ("linear_fp16_invariant", r"^_linear16"),
    ("norm", r"^triton_\w*rms_norm|^_rms_norm_kernel"),
    ("activation", r"^triton_\w*silu"),
    # rotary, residual adds, casts: Inductor-fused, named by no op that tells them apart
    ("inductor_fused_other", r"^triton_(poi|red|per)_"),
    ("kv_cache_write", r"reshape_and_cache|cache_kernel"),
    ("attention", r"flash|attn|attention|paged_attention|fmha"),
    ("linear_int4_default", r"machete|marlin"),
    ("linear_fp16_vllm_batch_invariant", r"^matmul_kernel_persistent|^bmm_kernel"),
    ("linear_fp16_library", r"gemm|cutlass|nvjet|sm90_xmma|cublas"),
    ("rotary", r"rotary|rope"),
    ("activation", r"silu|act_and_mul|gelu"),
    ("norm", r"rms|norm"),
    ("sampling_logits", r"softmax|sampl|argmax|topk|top_k|logprob|gather|scatter|sort"),
    ("copy_fill", r"copy|memcpy|memset|fill|cat|index|elementwise"),
]


def category(name: str) -> str:
    return next((cat for cat, pat in CATEGORIES if re.search(pat, name, re.IGNORECASE)), "other")


def summarize(kernels: list[tuple[str, float]], steps: int, wall_s: float) -> dict:
    """kernels: (name, µs) for every kernel the trace holds; per decode step (µs) by category, the top kernels,
    and the GPU's busy share of the wall time."""
    by_cat: dict[str, float] = {}
    by_name: dict[str, list] = {}
    for name, us in kernels:
        by_cat[category(name)] = by_cat.get(category(name), 0.0) + us
        entry = by_name.setdefault(name, [0, 0.0])
        entry[0] += 1
        entry[1] += us
    total = sum(by_cat.values())
    top = sorted(by_name.items(), key=lambda kv: -kv[1][1])[:25]
    return {
        "steps": steps,
        "wall_ms_per_step": wall_s * 1e3 / steps,
        "gpu_ms_per_step": total / 1e3 / steps,
        "gpu_busy_fraction": total / 1e6 / wall_s if wall_s else None,
        "per_step_us": {
            c: round(us / steps, 2) for c, us in sorted(by_cat.items(), key=lambda kv: -kv[1])
        },
        "share": {c: round(us / total, 4) for c, us in by_cat.items()} if total else {},
        "top_kernels": [
            {
                "name": n[:160],
                "category": category(n),
                "calls_per_step": c / steps,
                "us_per_step": us / steps,
            }
            for n, (c, us) in top
        ],
    }


def recategorized(run: dict) -> dict:
    """A written run's top kernels summed again by CATEGORIES as they are now (µs per step; what the top 25 leave
    out of the GPU's time is 'not_in_top_kernels'): a profile taken before the categories were corrected."""
    by_cat: dict[str, float] = {}
    for k in run["top_kernels"]:
        by_cat[category(k["name"])] = by_cat.get(category(k["name"]), 0.0) + k["us_per_step"]
    rest = run["gpu_ms_per_step"] * 1e3 - sum(by_cat.values())
    by_cat["not_in_top_kernels"] = rest
    return {c: round(us, 2) for c, us in sorted(by_cat.items(), key=lambda kv: -kv[1])}


def record(paths: list[Path]) -> dict:
    """One record of several profiles (h200_8b.sh profile-8b's profile-8b-MODEL.json): per model and stream count
    the step's wall and GPU time, the GPU's busy share and the time per category, with the alone-vs-amid check."""
    fields = (
        "streams",
        "steps",
        "wall_ms_per_step",
        "gpu_ms_per_step",
        "gpu_busy_fraction",
        "tokens_per_s",
    )
    models = []
    for path in paths:
        doc = json.loads(path.read_text())
        runs = [
            {k: run.get(k) for k in fields}
            | {"per_step_us": recategorized(run), "top_kernels": run["top_kernels"]}
            for run in doc["runs"]
        ]
        models.append(
            {
                "model": Path(doc["model_dir"]).name,
                "invariant": doc["invariant"],
                "gpu": doc["gpu"],
                "runs": runs,
                "alone_vs_amid_63": doc.get("alone_vs_amid_63"),
            }
        )
    return {"what": "issue 45 item 3: where a decode step's time goes", "models": models}


def engine_args(model_dir: Path) -> dict:
    """The model's model.json (its newest version), keys vLLM's EngineArgs knows."""
    from vllm.engine.arg_utils import EngineArgs

    versions = sorted(
        (p for p in model_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
    )
    args = json.loads((versions[-1] / "model.json").read_text())
    known = set(EngineArgs.__dataclass_fields__)
    dropped = sorted(set(args) - known)
    if dropped:
        print("model.json keys EngineArgs does not take, left out:", dropped, flush=True)
    return {k: v for k, v in args.items() if k in known}


def profile_streams(llm, streams: int, tokens: int) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=tokens, temperature=0.0, ignore_eos=True)
    prompts = [{"prompt_token_ids": [128000, 791 + i, 1217, 374]} for i in range(streams)]
    llm.generate(prompts, params, use_tqdm=False)  # warm-up: graphs captured, kernels compiled
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    kernels = [
        (e.name, e.device_time)  # µs
        for e in prof.events()
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA and e.device_time > 0
    ]
    out = summarize(kernels, tokens, wall)
    out["streams"] = streams
    out["tokens_per_s"] = streams * tokens / wall
    return out


def alone_vs_amid(llm, tokens: int, others: int = 63) -> dict:
    """One prompt greedy alone and amid `others` different prompts in one batch: whether its token ids and
    log-probs are bit-identical (an invariant config must give True; a default one may not)."""
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=tokens, temperature=0.0, ignore_eos=True, logprobs=0)
    probe = {"prompt_token_ids": [128000, 40, 1093, 311]}
    batch = [probe] + [
        {"prompt_token_ids": [128000, 2000 + i, 374, 264 + i]} for i in range(others)
    ]

    def answer(out):
        completion = out.outputs[0]
        # per position {token id: Logprob}: vllm 0.22.0 vllm/logprobs.py:27 and :159 (list or FlatLogprobs)
        ids = list(completion.token_ids)
        return ids, [
            position[token].logprob
            for token, position in zip(ids, completion.logprobs, strict=True)
        ]

    alone = answer(llm.generate([probe], params, use_tqdm=False)[0])
    amid = answer(llm.generate(batch, params, use_tqdm=False)[0])
    return {"others": others, "ids_identical": alone[0] == amid[0],
            "logprobs_identical": alone[1] == amid[1]}  # fmt: skip


def main() -> int:
    # decode_profile.py record PROFILE.json ... > docs/runs/DATE-decode-profile-GPU.json
    if sys.argv[1:2] == ["record"]:
        json.dump(record([Path(p) for p in sys.argv[2:]]), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "model_dir", type=Path, help="a built repository's model directory (holds N/model.json)"
    )
    ap.add_argument("--streams", default="1,64")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument(
        "--invariant", action="store_true", help="VLLM_BATCH_INVARIANT=1, as serve sets it"
    )
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = (
        "0"  # the engine in this process: its kernels in this trace
    )
    if args.invariant:
        os.environ["VLLM_BATCH_INVARIANT"] = "1"
    import torch
    from vllm import LLM

    llm = LLM(**engine_args(args.model_dir))
    result = {
        "what": "issue 45 item 3: a decode step's GPU time by what the kernels do (torch profiler, CUPTI)",
        "model_dir": str(args.model_dir),
        "invariant": args.invariant,
        "gpu": torch.cuda.get_device_name(),
        "runs": [profile_streams(llm, int(s), args.tokens) for s in args.streams.split(",")],
    }
    try:
        result["alone_vs_amid_63"] = alone_vs_amid(llm, args.tokens)
    except Exception as e:  # noqa: BLE001 -- the profile is kept whatever this check meets
        result["alone_vs_amid_63"] = {"error": f"{type(e).__name__}: {e}"}
    print("alone vs amid 63 others:", result["alone_vs_amid_63"], flush=True)
    args.out.write_text(json.dumps(result, indent=1))
    for run in result["runs"]:
        head = f"{run['streams']} streams: {run['wall_ms_per_step']:.2f} ms/step wall"
        print(head, f"{run['gpu_ms_per_step']:.2f} GPU", run["per_step_us"], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
