"""Quick search vs brute force replayed on the H200's recorded --brute measurements: the same constraints,
the same numbers (mismatches under load included), no server. A replay, not a live run: it checks the
search's decisions and its measurement budget on real surfaces, not measurement noise.

- docs/runs/2026-11-30-tune-h200-fixed/brute-fixed-report.json: gpu-mlp-fixed.yaml (max_batch_size 512),
  39 candidates × 2 loads; every max_batch_size below 128 changed the answers' bits there.
- docs/runs/2026-11-30-tune-h200/brute-*-report-pre-b3cf2da.json: gpu-mlp.yaml (64), 33 candidates × 2.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from tritonbuild.recipe.models import Tune
from tritonbuild.triton.config import model_config_pb2
from tritonbuild.tune import quick, search
from tritonbuild.tune.space import Grid

RUNS = ROOT / "docs" / "runs"
FIXED = "2026-11-30-tune-h200-fixed/brute-fixed-report.json"
FIXED2 = "2026-11-30-tune-h200-fixed/brute-fixed-2-report.json"
OLD = [
    "2026-11-30-tune-h200/brute-strict-report-pre-b3cf2da.json",
    "2026-11-30-tune-h200/brute-relaxed-report-pre-b3cf2da.json",
]


def _replay(report: str, mode: str, min_vs_default: float):
    data = json.loads((RUNS / report).read_text())
    table = {(m["candidate"], m["load"]): m for m in data["measurements"]}
    pb2 = model_config_pb2()
    mc = pb2.ModelConfig(
        name=data["model"], backend="python", max_batch_size=data["default"]["max_batch_size"]
    )
    g = mc.instance_group.add()
    g.kind, g.count = pb2.ModelInstanceGroup.Kind.Value("KIND_GPU"), 1
    g.gpus.append(0)
    tune = Tune.model_validate({**data["tune"], "min_vs_default": min_vs_default})
    grid = Grid(tune, mc)
    seen: set = set()

    def measure(c, load):
        key = (c.label, load)
        if key in seen and ("default (again, after the search)", load) in table:
            key = (
                "default (again, after the search)",
                load,
            )  # the default's second measurement, as recorded
        seen.add((c.label, load))
        m = table[key]
        return search.Point(load, m["throughput"], m["p99_ms"], m["errors"], m["mismatches"])

    ev = search.Evaluator(
        measure,
        ["c1", "c64"],
        sla_p99_ms=tune.sla_p99_ms,
        min_vs_default=min_vs_default,
        exact_under_load=True,
    )
    best = {"quick": quick.quick, "brute": search.brute}[mode](
        ev, grid, grid.default, lambda c: None
    )
    grid_size = len({grid.default, *grid.all()}) * 2
    return best, ev, grid_size, (lambda c: table[(c.label, "c64")]["throughput"])


@pytest.mark.parametrize("report", [FIXED, FIXED2, *OLD])
@pytest.mark.parametrize("min_vs_default", [1.0, 0.95, 0.85, 0.7])
def test_quick_is_within_095_of_brute_with_a_quarter_of_the_measurements(report, min_vs_default):
    best_b, _ev_b, grid_size, top = _replay(report, "brute", min_vs_default)
    best_q, ev_q, _, _ = _replay(report, "quick", min_vs_default)
    assert ev_q.count <= 0.25 * grid_size, (ev_q.count, grid_size)
    assert (best_b is None) == (best_q is None)
    if best_b is not None:
        assert top(best_q) >= 0.95 * top(best_b), (best_q.label, best_b.label)
        assert ev_q.verdict(best_q).feasible


def test_on_the_fixed_shape_surface_the_answer_is_brutes_and_bit_exact():
    """The live brute run chose 2 GPU instances × batches of up to 128 (14.4× the default at 64 clients,
    1.01× at 1 client); every size below 128 changed the bits and is never chosen."""
    best_b, _ev_b, grid_size, _ = _replay(FIXED, "brute", 1.0)
    best_q, ev_q, _, _ = _replay(FIXED, "quick", 1.0)
    assert best_b.label == best_q.label == "2xgpu mbs128 delay0us"
    assert grid_size == 78 and ev_q.count <= 19
    unsafe = {c.max_batch_size for (c, _lo), p in ev_q.results.items() if p.mismatches}
    assert unsafe and max(unsafe) < 128
