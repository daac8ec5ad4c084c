"""Which tile rows a linear16_bench.py sweep keeps (no GPU needed: the sweep's timings in, the rows out)."""

from __future__ import annotations

import itertools

try:
    from benchmarks.vllm.w4a16_choose import choose_tiles, tiles_name
except ImportError:  # run as a script: its own folder is on the path
    from w4a16_choose import choose_tiles, tiles_name

SWEEP_M = (1, 64, 256)  # the row counts the sweep times


def choose(layers: dict, m64_budget: float) -> dict:
    """{layer name: tiles}: the rows whose 1-row times sum least over the layers while their 256-row times sum to at
    most vLLM's batch-invariant linear's (where it was timed) and their 64-row times to at most m64_budget x cuBLAS
    fp16's (each layer's candidates on its front: faster at 1 row only if slower at 256); where no combination
    meets both, w4a16_choose.choose_tiles on 1 and 64 rows."""
    names, fronts = list(layers), {}
    for name in names:
        one, big = layers[name]["ms"][1], layers[name]["ms"][256]
        ok = [
            t
            for t in layers[name]["candidates"]
            if all(isinstance(layers[name]["ms"][m].get(tiles_name(t)), float) for m in SWEEP_M)
        ]
        front = []
        for t in sorted(ok, key=lambda t: one[tiles_name(t)]):
            if not front or big[tiles_name(t)] < big[tiles_name(front[-1])]:
                front.append(t)
        fronts[name] = front[:8]

    def total(m, key):
        values = [layers[n]["ms"][m].get(key) for n in names]
        return sum(values) if all(isinstance(v, float) for v in values) else float("inf")

    limit64, limit256 = m64_budget * total(64, "cublas_fp16_ms"), total(256, "vllm_invariant_ms")
    best = None
    for combo in itertools.product(*(fronts[n] for n in names)):
        t = {
            m: sum(layers[n]["ms"][m][tiles_name(c)] for n, c in zip(names, combo, strict=True))
            for m in SWEEP_M
        }
        if t[64] <= limit64 and t[256] <= limit256 and (best is None or t[1] < best[0]):
            best = (t[1], dict(zip(names, combo, strict=True)))
    return best[1] if best else choose_tiles(layers, m64_budget)
