"""Does a compiled model's answer depend on the machine that compiled it? One candidate cause of the
invariant INT4 model's log-probs differing between two H100 machines (2026-12-06; docs/explanation/
determinism.md), measured without vLLM. Run on an H100 (2026-12-06: docs/runs/2026-12-06-inductor-bits-h100.json):
the default compile gave one output over 3 fresh processes, the tuned one 3 (TORCHINDUCTOR_DETERMINISTIC=1 too).

vLLM compiles the model with TorchInductor; under VLLM_BATCH_INVARIANT=1 a decoder layer's residual
add + RMSNorm still takes vLLM's native path (vllm 0.22.0 model_executor/layers/layernorm.py
forward_cuda: only a norm without a residual gets the batch-invariant kernel), so Inductor generates
a Triton reduction for it. Where such a kernel has several candidate configs, Inductor times them on
the device at first use and keeps the fastest (CachingAutotuner); the configs sum a row in different
orders, so the pick is part of the bits, and a fresh machine or an empty cache picks again. torch's
own `deterministic` option exists for this ("skips any on device benchmarking in Inductor if we know
they affect numerics", TORCHINDUCTOR_DETERMINISTIC=1). Read in the sources, not yet measured:
torch 2.13's heuristics keep a single config for an inner reduction over more than 1,024 elements
unless max-autotune is on (triton_heuristics._persistent_reduction_configs), which would leave
hidden 4096 untuned; vLLM 0.22 turns max_autotune and coordinate-descent tuning on for single-size
compile ranges (compilation/compiler_interface.py set_inductor_config; compile_sizes, empty by
default).

N fresh processes per mode, each with empty Inductor and Triton caches (a fresh machine's state),
compile Llama's residual add + RMSNorm (hidden 4096, fp16) and hash the outputs at a few row counts;
the modes: default (dynamic rows), tuned (one size per compile, max-autotune and coordinate-descent
tuning on: vLLM's single-size ranges) and both again with TORCHINDUCTOR_DETERMINISTIC=1. It reports
the distinct output hashes per mode and each generated reduction kernel's kept configs (the first run's
record, 2026-12-06, read them under a name torch does not use: `best_config: null` there).

    python3 benchmarks/vllm/inductor_bits.py [--processes 5] [--device cuda] > inductor-bits.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HIDDEN = 4096
TUNED = {
    "BITS_DYNAMIC": "0",
    "TORCHINDUCTOR_MAX_AUTOTUNE": "1",
    "TORCHINDUCTOR_COORDINATE_DESCENT_TUNING": "1",
}
DETERMINISTIC = {"TORCHINDUCTOR_DETERMINISTIC": "1"}
MODES = {
    "default": {},
    "tuned": TUNED,
    "default_deterministic": DETERMINISTIC,
    "tuned_deterministic": {**TUNED, **DETERMINISTIC},
}
ROWS = (1, 7, 64, 256)


def child(device: str) -> dict:
    import torch

    def add_rms_norm(x, residual, weight):  # vLLM 0.22 RMSNorm.forward_static with a residual
        x = x + residual
        residual = x
        variance = x.float().pow(2).mean(dim=-1, keepdim=True)
        y = (x.float() * torch.rsqrt(variance + 1e-5)).to(x.dtype) * weight
        return y, residual

    compiled = torch.compile(add_rms_norm, dynamic=os.environ.get("BITS_DYNAMIC", "1") == "1")
    g = torch.Generator(device="cpu").manual_seed(0)
    weight = (1 + 0.1 * torch.randn(HIDDEN, generator=g)).half().to(device)
    digests = {}
    for rows in ROWS:
        x = torch.randn(rows, HIDDEN, generator=g).half().to(device)
        r = torch.randn(rows, HIDDEN, generator=g).half().to(device)
        y, _ = compiled(x, r, weight)
        digests[rows] = hashlib.sha256(y.cpu().numpy().tobytes()).hexdigest()[:16]
    return {"digests": digests, "torch": torch.__version__}


def kernels(cache: Path) -> list[dict]:
    """Each generated reduction kernel and the configs Inductor kept in its folder. The kept config
    is saved beside the kernel's source as `<hash>.best_config`, the hash of the kernel file's name
    with torch's own key (torch 2.13 torch/_inductor/runtime/autotune_cache.py 131-132, 155-166),
    not `<kernel>.best_config`: every such file of the kernel's folder is listed (a folder usually
    holds one kernel; `kernels_in_folder` says when not). Empty where nothing was timed."""
    out = []
    for src in sorted(cache.rglob("*.py")):
        text = src.read_text(errors="replace")
        if "reduction(" not in text or "@triton.jit" not in text:
            continue
        kept = [json.loads(p.read_text()) for p in sorted(src.parent.glob("*.best_config"))]
        out.append(
            {
                "kernel": src.stem[:12],
                "heuristic": "persistent_reduction"
                if "persistent_reduction(" in text
                else "reduction",
                "kept_configs": kept,
                "kernels_in_folder": len(list(src.parent.glob("*.py"))),
            }
        )
    return out


def parent(processes: int, device: str) -> dict:
    import torch

    runs = {}
    for mode, extra in MODES.items():
        rows = []
        for _ in range(processes):
            with tempfile.TemporaryDirectory() as tmp:
                env = {
                    **os.environ,
                    **extra,
                    "TORCHINDUCTOR_CACHE_DIR": f"{tmp}/inductor",
                    "TRITON_CACHE_DIR": f"{tmp}/triton",
                }
                t0 = time.monotonic()
                done = subprocess.run(
                    [sys.executable, __file__, "--child", "--device", device],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode:
                    rows.append({"error": done.stderr[-2000:]})
                    continue
                row = json.loads(done.stdout.strip().splitlines()[-1])
                row["seconds"] = round(time.monotonic() - t0, 1)
                row["kernels"] = kernels(Path(tmp) / "inductor")
                rows.append(row)
        distinct = sorted({json.dumps(r.get("digests"), sort_keys=True) for r in rows})
        runs[mode] = {"processes": rows, "distinct_outputs": len(distinct)}
    gpu = torch.cuda.get_device_name(0) if device == "cuda" and torch.cuda.is_available() else None
    return {"device": device, "gpu": gpu, "torch": torch.__version__, "hidden": HIDDEN, **runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.device)))
    else:
        print(json.dumps(parent(args.processes, args.device), indent=1))


if __name__ == "__main__":
    main()
