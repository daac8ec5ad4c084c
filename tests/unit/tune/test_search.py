"""The search logic on a synthetic, deterministic throughput surface (no server): the objective, the
constraints at every load, the goldens veto, and quick search vs brute force."""

from __future__ import annotations

import pytest

from tritonbuild.recipe.models import Tune
from tritonbuild.triton.config import model_config_pb2
from tritonbuild.tune import quick, search
from tritonbuild.tune.loadgen import Window, is_stable
from tritonbuild.tune.space import Grid, apply


def _mc(mbs: int = 64, kind: str = "KIND_GPU"):
    pb2 = model_config_pb2()
    mc = pb2.ModelConfig(name="m", backend="python", max_batch_size=mbs)
    g = mc.instance_group.add()
    g.kind = pb2.ModelInstanceGroup.Kind.Value(kind)
    g.count = 1
    g.gpus.append(0)
    return mc


def surface(c, load: str) -> search.Point:
    """A GPU-like model: Python overhead per execute, batching amortises it, the queue delay costs latency
    at low load, instances overlap until 4; at 1 client batching cannot help."""
    clients = int(load[1:])
    batch = min(clients, c.max_batch_size) if c.batching else 1
    if c.batching and c.max_queue_delay_us == 0:
        batch = max(1, int(batch * 0.7))  # without a delay, batches leave before they fill
    per_exec_ms = 1.5 + 0.01 * batch
    par = min(c.instances, 4, max(1, clients // batch))
    delay_ms = c.max_queue_delay_us / 1000 if c.batching and clients < c.max_batch_size else 0.0
    latency = per_exec_ms + delay_ms
    thr = min(clients / (latency / 1000), par * batch / (per_exec_ms / 1000))
    p99 = latency * max(1.0, clients / (par * batch)) * 1.3
    return search.Point(load, thr, p99)


def _run(mode, tune: Tune, verify=lambda c: None, measure=surface):
    mc = _mc()
    grid = Grid(tune, mc)
    ev = search.Evaluator(
        measure,
        [f"c{x}" for x in tune.concurrency],
        sla_p99_ms=tune.sla_p99_ms,
        min_vs_default=tune.min_vs_default,
        exact_under_load=True,
    )
    return (
        {"quick": quick.quick, "brute": search.brute}[mode](ev, grid, grid.default, verify),
        ev,
        grid,
    )


TUNE = Tune(
    instance_counts=[1, 2, 4, 8],
    max_queue_delay_us=[0, 100, 1000],
    concurrency=[1, 64],
    sla_p99_ms=50,
)


def test_quick_is_within_095_of_brute_with_a_quarter_of_its_measurements():
    best_b, ev_b, grid = _run("brute", TUNE)
    best_q, ev_q, _ = _run("quick", TUNE)
    assert (
        ev_b.count == len({grid.default, *grid.all()}) * 2 + 2 == 130
    )  # + the default again at both loads
    top_b, top_q = surface(best_b, "c64").throughput, surface(best_q, "c64").throughput
    assert top_q >= 0.95 * top_b
    assert ev_q.count <= 0.25 * ev_b.count, ev_q.count
    # the winner never loses to Triton's default at either load, and meets the SLA at both
    for load in ("c1", "c64"):
        assert surface(best_q, load).throughput >= surface(grid.default, load).throughput
        assert surface(best_q, load).p99_ms <= 50
    assert (
        best_q.batching and best_q.max_queue_delay_us == 0
    )  # the delay that pays at 64 loses at 1 client


def test_the_best_at_high_load_is_refused_when_it_loses_at_low_load():
    best, ev, grid = _run("brute", TUNE)
    fastest = max(grid.all(), key=lambda c: surface(c, "c64").throughput)
    assert fastest != best
    assert any("default" in r for r in ev.verdict(fastest).reasons)


def test_goldens_veto_picks_the_next_best_and_records_why():
    vetoed = []

    def verify(c):
        if c.batching and c.max_batch_size >= 16:
            vetoed.append(c)
            return "outputs change with batch composition"
        return None

    best, ev, _ = _run("quick", TUNE, verify)
    assert vetoed and best not in vetoed and best.max_batch_size < 16
    assert all(ev.rejected[c] == "outputs change with batch composition" for c in vetoed)


def test_a_lucky_low_default_baseline_does_not_let_a_slower_config_through():
    """Seen on the H200: the default's first 1-client measurement came out at 618 req/s, others at 855-920."""
    calls = {"default_c1": 0}

    def noisy(c, load):
        p = surface(c, load)
        if c.is_default and load == "c1":
            calls["default_c1"] += 1
            p.throughput *= 0.6 if calls["default_c1"] == 1 else 1.0
        return p

    best, ev, grid = _run("brute", TUNE.model_copy(update={"min_vs_default": 0.95}), measure=noisy)
    assert calls["default_c1"] == 2 and ev.baseline("c1") == pytest.approx(
        surface(grid.default, "c1").throughput
    )
    assert surface(best, "c1").throughput >= 0.95 * surface(grid.default, "c1").throughput


def test_sla_nobody_meets_gives_no_winner():
    best, ev, grid = _run("quick", TUNE.model_copy(update={"sla_p99_ms": 0.01}))
    assert best is None
    assert any("SLA" in r for r in ev.verdict(grid.default).reasons)


def test_failed_requests_disqualify():
    def broken(c, load):
        p = surface(c, load)
        if c.batching:
            p.errors = 3
        return p

    best, _, _ = _run("brute", TUNE, measure=broken)
    assert best is not None and not best.batching


def test_grid_and_config_edit():
    mc = _mc(64)
    g = Grid(Tune(), mc)
    assert g.batch == [0, 4, 8, 16, 32, 64] and g.kind == "gpu"
    assert g.at(0, 0) == g.default and g.default.label == "default"
    c = g.at(1, 5, 1, 0)
    edited = apply(mc, c)
    assert (
        edited.max_batch_size == 64 and edited.dynamic_batching.max_queue_delay_microseconds == 500
    )
    assert [(x.count, list(x.gpus)) for x in edited.instance_group] == [(2, [0])]
    assert not apply(mc, g.default).HasField("dynamic_batching")
    assert mc.instance_group[0].count == 1  # the built config is not modified


@pytest.mark.parametrize(
    "thr,p99,ok",
    [
        ([100, 105, 98], [10, 10.5, 9.8], True),
        ([100, 130, 98], [10, 10, 10], False),
        ([100, 100, 100], [10, 10, 14], False),
    ],
)
def test_stability_rule(thr, p99, ok):
    ws = [
        Window(seconds=1.0, count=t, errors=0, latencies_ms=[p] * 100, mismatches=0)
        for t, p in zip(thr, p99, strict=True)
    ]
    assert is_stable(ws, 0.10) is ok


def _family(seed: int):
    """A family of plausible GPU-serving surfaces (deterministic per seed): per-execute overhead, per-row
    cost, a padded fixed shape or not, where extra instances stop helping, the batcher's hop and an extra
    instance's cost at low load, sizes whose bits change, and ±3 % measurement noise."""
    import random

    rnd = random.Random(seed)
    overhead = rnd.uniform(0.3, 3.0)
    per_row = rnd.uniform(0.001, 0.05)
    padded = rnd.random() < 0.5
    sat = rnd.choice([1, 2, 4, 8])
    hop, inst_cost = rnd.uniform(0.0, 0.2), rnd.uniform(0.0, 0.3)
    unsafe_below = rnd.choice([0, 0, 16, 64])
    cap = 64

    def measure(c, load):
        clients = int(load[1:])
        mbs = c.max_batch_size if c.batching else cap
        batch = min(clients, mbs) if c.batching else 1
        if c.batching and c.max_queue_delay_us == 0:
            batch = max(1, int(batch * 0.7))
        rows = mbs if padded else batch
        exec_ms = (
            overhead
            + per_row * rows
            + (hop if c.batching else 0)
            + inst_cost * (c.instances - 1) / 2
        )
        par = min(c.instances, sat, max(1, clients // batch))
        delay = c.max_queue_delay_us / 1000 if c.batching and clients < mbs else 0.0
        latency = exec_ms + delay
        thr = min(clients / (latency / 1000), par * batch / (exec_ms / 1000))
        noise = 1 + 0.03 * (random.Random(f"{seed}{c.label}{load}").random() * 2 - 1)
        p99 = latency * max(1.0, clients / (par * batch)) * 1.3
        bad = c.batching and c.max_batch_size < unsafe_below and clients > 1
        return search.Point(load, thr * noise, p99, mismatches=5 if bad else 0)

    return measure


def test_quick_on_a_family_of_surfaces_stays_in_budget_and_near_brute():
    """40 surfaces: quick never exceeds a quarter of the grid's measurements, never picks an infeasible
    config, and reaches 0.95x of brute's pick on most of those where brute finds one: 28 of 37 when written.
    The misses, plainly: 7 surfaces where a 500 us queue delay with more instances wins at 64 clients (the walk
    climbs with no delay and tries the delay only at its best point, then runs out of its quarter), and one
    where every batch size changes the bits and more instances without the batcher win. On the H200's three
    recorded surfaces (test_replay.py) it picks brute's own winner in all 12 settings."""
    tune = Tune(
        instance_counts=[1, 2, 4],
        batch_sizes=[4, 8, 16, 32, 64],
        max_queue_delay_us=[0, 500],
        concurrency=[1, 64],
        sla_p99_ms=50,
        min_vs_default=0.9,
    )
    near = solvable = 0
    for seed in range(40):
        measure = _family(seed)
        best_b, ev_b, grid = _run("brute", tune, measure=measure)
        best_q, ev_q, _ = _run("quick", tune, measure=measure)
        assert ev_q.count <= 0.25 * len({grid.default, *grid.all()}) * 2, seed
        assert best_q is None or ev_q.verdict(best_q).feasible, seed
        if best_b is not None:
            solvable += 1
            top = ev_b.results[(best_b, "c64")].throughput
            near += best_q is not None and ev_b.results[(best_q, "c64")].throughput >= 0.95 * top
    assert solvable >= 30 and near >= 0.75 * solvable, (near, solvable)


def test_paired_rounds_are_counted_in_the_progress_estimate():
    """The progress line's '[done/~expected] ... ~Ns left' counted the search's measurements only: during the
    paired rounds it read '[30/~8] ... ~0s left' (seen on the H200)."""
    from types import SimpleNamespace

    from tritonbuild.tune.run import TuneSession
    from tritonbuild.tune.search import Point

    session = object.__new__(TuneSession)
    lines, seen = [], []
    session.say, session.loads, session.paired = lines.append, ["c1", "c64"], {}
    default, candidate = SimpleNamespace(label="default"), SimpleNamespace(label="4 x 128")
    session.grid = SimpleNamespace(default=default)
    session.spec = Tune(
        rounds=5, min_vs_default=1.0, confidence=0.9
    )  # a clear gain: no round added
    session.done, session.guess = 10, 8

    def measure(who, load, phase="screening"):
        session.done += 1
        seen.append(session.guess - session.done)
        return Point(load, 100.0 if who is default else 120.0, 1.0)

    session.measure = measure
    session.confirm(candidate)
    assert (
        session.done == 30 and session.guess == 30
    )  # 2 configs x 5 rounds x 2 loads on top of 10 made
    assert (
        seen == sorted(seen, reverse=True) and seen[-1] == 0
    )  # what is left counts down to the last one


def _confirming_session(spec, readings: dict):
    """A tune session whose measure() hands out the given throughputs in order per (who, load)."""
    from types import SimpleNamespace

    from tritonbuild.tune.run import TuneSession
    from tritonbuild.tune.search import Point

    session = object.__new__(TuneSession)
    session.lines, session.paired, session.loads = [], {}, list(readings["candidate"])
    session.say = session.lines.append
    default, candidate = SimpleNamespace(label="default"), SimpleNamespace(label="batching")
    session.grid, session.spec, session.done, session.guess = (
        SimpleNamespace(default=default),
        spec,
        0,
        0,
    )
    left = {who: {lo: list(v) for lo, v in per.items()} for who, per in readings.items()}

    def measure(who, load, phase="screening"):
        session.done += 1
        return Point(load, left["default" if who is default else "candidate"][load].pop(0), 1.0)

    session.measure = measure
    return session, candidate


def test_a_rule_inside_noise_gets_more_paired_rounds_until_it_is_decided():
    """A clean-clone CI run: 'throughput >= 0.7x the default at c1: not met with this confidence, decided inside
    noise; paired ratio 0.818x [0.657-0.965] (90%, 3 rounds)' rejected a config that serves as fast as the default
    (one 20 ms execute per request at one client) after 3 rounds of a loaded machine. The rounds go on, two at a
    time, while an interval holds its threshold, up to the cap; c8 was decided after 3 and is measured with them."""
    c1_cand = [40.0, 52.0, 31.0, 50.0, 49.0, 51.0, 50.0, 99.0]
    c1_default = [50.0] * 8
    spec = Tune(rounds=3, max_rounds=9, min_vs_default=0.7, confidence=0.9)
    session, candidate = _confirming_session(
        spec,
        {
            "candidate": {"c1": c1_cand, "c8": [300.0] * 8},
            "default": {"c1": c1_default, "c8": [50.0] * 8},
        },
    )
    decisions = session.confirm(candidate)
    assert [(d.load, d.outcome) for d in decisions] == [("c1", "passed"), ("c8", "passed")]
    assert decisions[0].interval.rounds == 5 and decisions[0].interval.low >= 0.7
    assert len(session.paired["batching"]["c1"]["candidate"]) == 5 and session.done == 20
    assert session.guess == 20  # the progress estimate grew with the added rounds
    assert any(
        "inside noise at c1: 2 more paired round(s) (5 of at most 9)" in x for x in session.lines
    )


def test_the_added_rounds_stop_at_the_cap_and_the_rule_stays_inside_noise():
    spec = Tune(rounds=3, min_vs_default=1.0, confidence=0.9)  # max_rounds: twice rounds
    noisy = [60.0, 40.0] * 4
    session, candidate = _confirming_session(
        spec, {"candidate": {"c1": noisy}, "default": {"c1": [50.0] * 8}}
    )
    (decision,) = session.confirm(candidate)
    assert spec.round_cap == 6 and decision.interval.rounds == 6
    assert decision.outcome == "inside noise" and session.done == 12


def test_max_rounds_equal_to_rounds_decides_after_them_and_is_never_below():
    spec = Tune(rounds=3, max_rounds=3, min_vs_default=1.0)
    session, candidate = _confirming_session(
        spec, {"candidate": {"c1": [60.0, 40.0, 60.0]}, "default": {"c1": [50.0] * 3}}
    )
    (decision,) = session.confirm(candidate)
    assert decision.outcome == "inside noise" and session.done == 6  # max_rounds = rounds: no more
    with pytest.raises(ValueError, match=r"max_rounds 2 is below tune\.rounds 3"):
        Tune(rounds=3, max_rounds=2)


def _bucket_param(mc) -> str | None:
    from tritonbuild.tune.space import BUCKETS_PARAMETER

    return (
        mc.parameters[BUCKETS_PARAMETER].string_value
        if BUCKETS_PARAMETER in mc.parameters
        else None
    )


def test_each_batching_candidate_pads_to_one_bucket_its_batches_fit():
    """tune.buckets is searched with the batch sizes: a candidate of max_batch_size B pads every batch to the
    smallest bucket >= B, so it computes at one shape (invariant by construction), never at several."""
    mc = _mc(128)
    mc.parameters["tritonbuild_batch_buckets"].string_value = "128"
    g = Grid(Tune(determinism="invariant", buckets=[16, 32, 128], batch_sizes=[16, 24, 128]), mc)
    by_mbs = {g.at(0, b).max_batch_size: g.at(0, b).buckets for b in range(1, len(g.batch))}
    assert by_mbs == {16: (16,), 24: (32,), 128: (128,)}
    assert _bucket_param(apply(mc, g.at(0, 2))) == "32"


def test_the_default_is_the_model_as_built_unless_the_baseline_is_plain():
    """baseline built (the default): Triton's default config serves the built model, padded to its buckets like
    every candidate (both sides invariant); plain: the wrapper's padding off (a row computes at the rows it came
    with), the comparison the issue's first bucket runs made."""
    mc = _mc(128)
    mc.parameters["tritonbuild_batch_buckets"].string_value = "128"
    built = Grid(Tune(determinism="invariant", buckets=[16, 128]), mc)
    assert built.default.buckets is None and _bucket_param(apply(mc, built.default)) == "128"
    assert built.at(1, 0).buckets is None  # more instances, no batcher: the built model too
    assert built.batch == [0, 16, 128]  # batch sizes default to the buckets
    plain = Grid(Tune(determinism="invariant", buckets=[16, 128], baseline="plain"), mc)
    assert plain.default.buckets == () and _bucket_param(apply(mc, plain.default)) == ""
    assert plain.at(1, 0).buckets == ()


def test_a_plain_baseline_without_buckets_is_a_recipe_error():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="baseline: plain"):
        Tune(baseline="plain")


def test_a_flag_the_tune_section_cannot_take_is_a_usage_error():
    from tritonbuild.errors import UsageError
    from tritonbuild.tune.built import with_flags

    assert with_flags(TUNE, rounds=None) is TUNE
    assert with_flags(TUNE, rounds=3).rounds == 3
    with pytest.raises(UsageError, match=r"baseline: plain .* needs tune\.buckets"):
        with_flags(TUNE, baseline="plain")
