"""Quick search vs brute force replayed on the H200's recorded measurements (docs/runs/2026-11-30-tune-h200/:
two --brute runs, 33 candidates × 2 loads each): the same constraints, the same numbers, no server.
A replay, not a live run: it checks the search's decisions on a real surface, not measurement noise."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from tritonbuild.recipe.models import Tune
from tritonbuild.repository.config import model_config_pb2
from tritonbuild.tune import search
from tritonbuild.tune.space import Grid

RUNS = ROOT / "docs" / "runs" / "2026-11-30-tune-h200"


def _replay(report: str, mode: str, min_vs_default: float):
    table = {(m["candidate"], m["load"]): m for m in json.loads((RUNS / report).read_text())["measurements"]}
    pb2 = model_config_pb2()
    mc = pb2.ModelConfig(name="gpu-mlp", backend="python", max_batch_size=64)
    g = mc.instance_group.add()
    g.kind, g.count = pb2.ModelInstanceGroup.Kind.Value("KIND_GPU"), 1
    g.gpus.append(0)
    tune = Tune(instance_counts=[1, 2, 4], max_queue_delay_us=[0, 500], concurrency=[1, 64], sla_p99_ms=50,
                min_vs_default=min_vs_default)
    grid = Grid(tune, mc)

    def measure(c, load):
        m = table[(c.label, load)]
        return search.Point(load, m["throughput"], m["p99_ms"], m["errors"], m["mismatches"])

    ev = search.Evaluator(measure, ["c1", "c64"], sla_p99_ms=50, min_vs_default=min_vs_default, exact_under_load=True)
    best = getattr(search, mode)(ev, grid, grid.default, lambda c: None)
    return best, ev, (lambda c: table[(c.label, "c64")]["throughput"])


@pytest.mark.parametrize("report", ["brute-strict-report-pre-b3cf2da.json", "brute-relaxed-report-pre-b3cf2da.json"])
@pytest.mark.parametrize("min_vs_default", [1.0, 0.95, 0.85, 0.7])
def test_quick_matches_brute_on_the_h200_surface(report, min_vs_default):
    best_b, ev_b, top = _replay(report, "brute", min_vs_default)
    best_q, ev_q, _ = _replay(report, "quick", min_vs_default)
    assert (best_b is None) == (best_q is None)
    if best_b is not None:
        assert top(best_q) >= 0.95 * top(best_b), (best_q.label, best_b.label)
    assert ev_q.count < ev_b.count


def test_quick_uses_a_quarter_when_the_climb_finds_a_feasible_winner():
    best_b, ev_b, top = _replay("brute-relaxed-report-pre-b3cf2da.json", "brute", 0.85)
    best_q, ev_q, _ = _replay("brute-relaxed-report-pre-b3cf2da.json", "quick", 0.85)
    assert top(best_q) >= 0.95 * top(best_b) and ev_q.count <= 0.25 * ev_b.count
