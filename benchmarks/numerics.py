"""Portable numerics ÷ native speed (issue 41): `python benchmarks/run.py --only numerics`.

Each round runs every configuration in a fresh process (MKL, ATen, oneDNN and OpenBLAS read their variables
once, at load), interleaved: native, portable x86-64 (MKL's COMPATIBLE branch), portable intel-avx2 (MKL's
AVX2 strict branch; on a non-Intel CPU MKL takes its AUTO branch instead). Both at the same fixed thread count
(portable fixes it; the ratio is the cost of the pinned paths, not of the threads). Workloads: the bundled torch
examples as verify runs them (image-embedder's TorchScript, risk-scorer's MLP row by row) and a 4096-wide fp32
MLP (4096 → 4096 → 4096, ReLU) at batch 1 and 64. Per workload: the median ratio over rounds and its range.
Target >= 0.8.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_WORK = r"""
import json, sys, time
import numpy as np, torch
threads, root = int(sys.argv[1]), sys.argv[2]
torch.set_num_threads(threads)
def best(fn, n):
    fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter(); fn(); times.append(time.perf_counter() - t0)
    return min(times) * 1e3
g = np.load(f"{root}/recipes/examples/goldens/image-embedder.npz")
xs = [torch.from_numpy(g[k]) for k in sorted(g.files) if k.startswith("input.")]
emb = torch.jit.load(f"{root}/model_repository/image-embedder/1/model.pt").eval()
w = np.load(f"{root}/recipes/examples/risk_scorer/weights.npz")
net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
net.load_state_dict({k.replace("_", "."): torch.from_numpy(w[k]) for k in w.files})
rows = torch.rand(8, 16, generator=torch.Generator().manual_seed(0))
torch.manual_seed(1)
mlp = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096)).eval()
x1, x64 = (torch.rand(b, 4096, generator=torch.Generator().manual_seed(b)) for b in (1, 64))
with torch.inference_mode():
    out = {
        "image-embedder": best(lambda: [emb(x) for x in xs], 200),
        "risk-scorer": best(lambda: [torch.softmax(net(r[None]), -1) for r in rows], 200),
        "mlp4096 batch 1": best(lambda: mlp(x1), 40),
        "mlp4096 batch 64": best(lambda: mlp(x64), 15),
    }
print(json.dumps(out))
"""


def _once(env: dict, threads: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _WORK, str(threads), str(ROOT)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_numerics(rounds: int = 5, threads: int = 1) -> dict:
    from tritonbuild.core.numerics import fingerprint, portable_env, summary

    configs = {
        "native": {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)},
        "portable x86-64": portable_env("x86-64", threads),
        "portable intel-avx2": portable_env("intel-avx2", threads),
    }
    seen: dict[str, list[dict]] = {name: [] for name in configs}
    for _ in range(rounds):
        for name, env in configs.items():
            seen[name].append(_once(env, threads))
    out: dict = {"machine": summary(fingerprint(("torch",))), "threads": threads, "rounds": rounds}
    for name in configs:
        if name == "native":
            continue
        ratios = {}
        for work in seen["native"][0]:
            each = [n[work] / p[work] for n, p in zip(seen["native"], seen[name], strict=True)]
            ratios[work] = {
                "speed_ratio_median": round(statistics.median(each), 3),
                "range": [round(min(each), 3), round(max(each), 3)],
                "native_ms_median": round(statistics.median(n[work] for n in seen["native"]), 3),
            }
        out[f"{name} ÷ native"] = ratios
    return out


if __name__ == "__main__":
    print(json.dumps(bench_numerics(), indent=2))
