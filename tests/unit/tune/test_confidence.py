"""Decisions with stated confidence, on seeded synthetic measurements (no server): the paired bootstrap interval,
the three outcomes of a rule (a rule decided inside noise says so), and a search whose pick survives the noise
that made single readings pick differently from run to run."""

from __future__ import annotations

import numpy as np
import pytest

from tritonbuild.recipe.models import Tune
from tritonbuild.triton.config import model_config_pb2
from tritonbuild.tune import quick, search
from tritonbuild.tune.confidence import Decision, abba_order, overlap, ratio_interval
from tritonbuild.tune.space import Grid


def _readings(true_ratio: float, noise: float, rounds: int, seed: int, drift=None):
    """(candidate, default) throughputs of paired rounds: a common drift per round (the machine), independent
    noise per reading."""
    rng = np.random.default_rng(seed)
    drift = np.ones(rounds) if drift is None else np.asarray(drift)
    default = 1000.0 * drift * (1 + noise * rng.standard_normal(rounds))
    candidate = 1000.0 * true_ratio * drift * (1 + noise * rng.standard_normal(rounds))
    return list(candidate), list(default)


def test_a_clear_gain_passes_with_its_interval_above_the_threshold():
    candidate, default = _readings(1.22, 0.03, 5, seed=1)
    decision = Decision("throughput", "c1", 1.0, ratio_interval(candidate, default, 0.9))
    assert decision.outcome == "passed" and decision.passed
    assert 1.0 < decision.interval.low <= decision.interval.ratio <= decision.interval.high
    assert "met" in decision.describe() and "5 rounds" in decision.describe()


def test_a_rule_decided_inside_noise_says_so_and_does_not_pass():
    candidate, default = _readings(1.0, 0.06, 5, seed=2)
    decision = Decision("throughput", "c1", 1.0, ratio_interval(candidate, default, 0.9))
    assert decision.interval.low < 1.0 < decision.interval.high
    assert decision.outcome == "inside noise" and not decision.passed
    assert "decided inside noise" in decision.describe()
    assert decision.to_dict()["outcome"] == "inside noise"


def test_a_clear_loss_fails():
    candidate, default = _readings(0.8, 0.03, 5, seed=3)
    decision = Decision("throughput", "c1", 1.0, ratio_interval(candidate, default, 0.9))
    assert decision.outcome == "failed" and decision.interval.high < 1.0


def test_pairing_cancels_a_drift_that_single_readings_mistake_for_a_loss():
    """The H200 default's 1-client figure moved 630 -> 424 within one run; rounds measured back to back see the
    same drift on both sides."""
    drift = [1.0, 0.9, 0.8, 0.72, 0.67]
    candidate, default = _readings(1.22, 0.01, 5, seed=4, drift=drift)
    interval = ratio_interval(candidate, default, 0.9)
    assert interval.low > 1.15 and interval.high < 1.30
    assert (
        candidate[-1] / default[0] < 1.0
    )  # a late candidate reading against an early default one: a "loss"


def test_the_interval_is_reproducible_and_narrows_with_more_rounds():
    few = ratio_interval(*_readings(1.1, 0.05, 3, seed=5), 0.9)
    assert few == ratio_interval(*_readings(1.1, 0.05, 3, seed=5), 0.9)
    many = ratio_interval(*_readings(1.1, 0.05, 30, seed=5), 0.9)
    assert many.high - many.low < few.high - few.low
    assert ratio_interval([900.0], [1000.0], 0.9).low == pytest.approx(
        0.9
    )  # one round: a point, said as such
    with pytest.raises(ValueError, match="paired rounds must match"):
        ratio_interval([1.0, 2.0], [1.0], 0.9)


def test_abba_order_alternates_who_goes_first():
    assert abba_order(4) == [(0, False), (1, True), (2, False), (3, True)]
    first, second = ratio_interval([1, 1.1], [1, 1], 0.9), ratio_interval([1.5, 1.6], [1, 1], 0.9)
    assert not overlap(first, second) and overlap(first, first)


# ---- the search on a noisy surface shaped like the H200 fixed-shape benchmark (#issue's numbers)
TRUE = {  # label -> (throughput at c1 relative to the default, at c64 relative to the default)
    "default": (1.0, 1.0),
    "4xgpu no-batching": (0.97, 2.5),
    "1xgpu mbs128 delay0us": (1.22, 11.0),
    "4xgpu mbs128 delay0us": (1.02, 15.0),
}


def _noisy_run(seed: int, rounds: int):
    pb2 = model_config_pb2()
    mc = pb2.ModelConfig(name="m", backend="python", max_batch_size=512)
    group = mc.instance_group.add()
    group.kind, group.count = pb2.ModelInstanceGroup.Kind.Value("KIND_GPU"), 1
    tune = Tune(
        batch_sizes=[128],
        instance_counts=[1, 4],
        max_queue_delay_us=[0],
        concurrency=[1, 64],
        sla_p99_ms=50,
        rounds=rounds,
    )
    grid = Grid(tune, mc)
    rng = np.random.default_rng(seed)

    def measure(candidate, load):
        base = 630.0 if load == "c1" else 1070.0
        factor = TRUE[candidate.label][0 if load == "c1" else 1]
        return search.Point(load, base * factor * (1 + 0.08 * rng.standard_normal()), 5.0)

    def confirm(candidate):
        readings = {load: ([], []) for load in ("c1", "c64")}
        for _round, candidate_first in abba_order(rounds):
            for who in (candidate, grid.default) if candidate_first else (grid.default, candidate):
                for load in readings:
                    readings[load][0 if who == candidate else 1].append(
                        measure(who, load).throughput
                    )
        return [
            Decision("throughput", load, 1.0, ratio_interval(c, d, 0.9))
            for load, (c, d) in readings.items()
        ]

    ev = search.Evaluator(
        measure,
        ["c1", "c64"],
        sla_p99_ms=50,
        min_vs_default=1.0,
        exact_under_load=True,
        confirm=confirm if rounds > 1 else None,
    )
    return quick.quick(ev, grid, grid.default, lambda c: None), ev


def test_paired_rounds_pick_the_same_config_where_single_readings_did_not():
    seeds = range(8)
    single = {_noisy_run(seed, rounds=1)[0].label for seed in seeds}
    assert len(single) > 1, single  # one 1-client reading decides: the pick moves with the noise
    paired = 0
    for seed in seeds:
        winner, ev = _noisy_run(seed, rounds=8)
        assert winner.label == "1xgpu mbs128 delay0us", seed
        four = next(c for c, _load in ev.order if c.label == "4xgpu mbs128 delay0us")
        if four in ev.decisions:  # confirmed: its 1-client rule was not met with 90 % confidence
            c1 = next(d for d in ev.decisions[four] if d.load == "c1")
            assert c1.outcome in ("inside noise", "failed") and ev.rules[four] == "paired"
            assert "at c1" in ev.rejected[four] and "×" in ev.rejected[four]
            paired += 1
        else:  # one screening reading more than 10 % below the default: a clear loss even for one reading
            assert any("< 0.9 × default" in reason for reason in ev.verdict(four).reasons), seed
    assert paired >= len(seeds) // 2


def test_paired_rounds_stop_after_four_finalists_and_the_rest_are_said_unconfirmed():
    pb2 = model_config_pb2()
    mc = pb2.ModelConfig(name="m", backend="python", max_batch_size=64)
    grid = Grid(
        Tune(
            batch_sizes=[4, 8, 16, 32, 64],
            instance_counts=[1],
            max_queue_delay_us=[0],
            concurrency=[1, 64],
        ),
        mc,
    )

    def measure(
        candidate, load
    ):  # every batching config fast at 64 clients and level with the default at 1
        fast = load == "c64" and candidate.batching
        return search.Point(load, 1000.0 * (candidate.max_batch_size + 1) if fast else 1000.0, 5.0)

    def confirm(candidate):  # ... where its paired interval holds 1.0: inside noise
        return [
            Decision("throughput", load, 1.0, ratio_interval([990, 1010], [1000, 1000], 0.9))
            for load in ("c1", "c64")
        ]

    ev = search.Evaluator(
        measure,
        ["c1", "c64"],
        sla_p99_ms=None,
        min_vs_default=1.0,
        exact_under_load=True,
        confirm=confirm,
    )
    assert (
        search.brute(ev, grid, grid.default, lambda c: None) == grid.default
    )  # the default is best
    assert len(ev.decisions) == search.FINALISTS == 4
    assert [c.max_batch_size for c in ev.decisions] == [64, 32, 16, 8]  # best first
    unconfirmed = [c for c, rule in ev.rules.items() if rule == "unconfirmed"]
    assert [c.max_batch_size for c in unconfirmed] == [4]
    assert ev.rejected[unconfirmed[0]].startswith("not confirmed: 4 finalists")
