"""Which tile rows a w4a16_bench.py sweep keeps (no GPU needed: the sweep's timings in, the rows out)."""

from __future__ import annotations

import itertools

# The sweep's choice: the fastest rows at 1 row whose 64 rows take at most this share of cuBLAS fp16's time
M64_BUDGET = 0.8


def tiles_name(tiles) -> str:
    return "x".join(map(str, tiles))


def best_tiles(rows: dict, candidates):
    """The candidate with the least time summed over the measured row counts; None where none ran."""

    def total(tiles):
        values = [row.get(tiles_name(tiles)) for row in rows.values()]
        return sum(values) if all(isinstance(v, float) for v in values) else float("inf")

    best = min(candidates, key=total)
    return best if total(best) < float("inf") else None


def choose_tiles(layers: dict, budget: float = M64_BUDGET) -> dict:
    """{layer name: tiles}: the rows whose 1-row times sum least over the layers while their 64-row times sum to at
    most budget x cuBLAS fp16's (each layer's candidates on its front: faster at 1 row only if slower at 64); where
    no combination meets it, each layer's best_tiles."""
    fronts = {}
    for name, entry in layers.items():
        one, many, front = entry["ms"][1], entry["ms"][64], []
        timed = [t for t in entry["candidates"] if isinstance(one.get(tiles_name(t)), float)]
        for t in sorted(timed, key=lambda t: one[tiles_name(t)]):
            if isinstance(many.get(tiles_name(t)), float) and (
                not front or many[tiles_name(t)] < many[tiles_name(front[-1])]
            ):
                front.append(t)
        fronts[name] = front[:8]
    limit = budget * sum(e["ms"][64]["cublas_fp16_ms"] for e in layers.values())
    best, names = None, list(layers)
    for combo in itertools.product(*(fronts[n] for n in names)):
        one = sum(layers[n]["ms"][1][tiles_name(t)] for n, t in zip(names, combo, strict=True))
        many = sum(layers[n]["ms"][64][tiles_name(t)] for n, t in zip(names, combo, strict=True))
        if many <= limit and (best is None or one < best[0]):
            best = (one, dict(zip(names, combo, strict=True)))
    if best is not None:
        return best[1]
    return {n: best_tiles(e["ms"], e["candidates"]) for n, e in layers.items()}
