"""The tune report on synthetic measurements (no server): every candidate that was not chosen is listed with its
cause and what decided it, the per-config answers, the client-bound flag, and 'the default is best' said as
such."""

from __future__ import annotations

from types import SimpleNamespace

from tritonbuild.recipe.models import Tune
from tritonbuild.triton.config import model_config_pb2
from tritonbuild.tune import quick, search
from tritonbuild.tune.confidence import Decision, ratio_interval
from tritonbuild.tune.loadgen import Result
from tritonbuild.tune.rejections import RULES
from tritonbuild.tune.report import build_report, served_bits
from tritonbuild.tune.space import Grid

LOADS = ["c1", "c64"]


def _grid(tune: Tune) -> Grid:
    pb2 = model_config_pb2()
    mc = pb2.ModelConfig(name="m", backend="python", max_batch_size=64)
    group = mc.instance_group.add()
    group.kind, group.count = pb2.ModelInstanceGroup.Kind.Value("KIND_GPU"), 1
    return Grid(tune, mc)


def _ceiling(throughput: float) -> Result:
    return Result(
        load="c64",
        throughput=throughput,
        p50_ms=1,
        p95_ms=1,
        p99_ms=1,
        requests=1000,
        errors=0,
        mismatches=0,
        stable=True,
        windows=2,
        seconds=2,
    )


def _report(ev, grid, winner, tune, ceiling=20000.0, **extra):
    manifest_model = SimpleNamespace(
        name="m",
        version=1,
        backend="python",
        target="gpu",
        verify=SimpleNamespace(batch_invariance="require"),
    )
    return build_report(
        manifest_model,
        tune,
        grid,
        LOADS,
        ev,
        grid.default,
        winner,
        _ceiling(ceiling),
        {},
        extra.pop("load_errors", {}),
        [],
        brute=True,
        processes=2,
        server_version="2.51.0",
        elapsed=1.0,
        no_verify=False,
        base_instances=[],
        **extra,
    )


# batch size -> what goes wrong with it (4 instances of 16 is refused by the server, see load_errors)
SURFACE = {  # label: (c1, c64, p99 at c64, errors, mismatches at c64)
    "default": (600, 1000, 10, 0, 0),
    "2xgpu no-batching": (660, 1900, 12, 0, 0),  # passes every rule: the runner-up
    "1xgpu mbs8 delay0us": (620, 5000, 8, 0, 40),  # answers differ under load
    "2xgpu mbs8 delay0us": (610, 6000, 80, 0, 0),  # misses the SLA
    "1xgpu mbs16 delay0us": (700, 7000, 8, 0, 0),  # the winner
    "2xgpu mbs16 delay0us": (
        605,
        9000,
        9,
        0,
        0,
    ),  # passes screening; the paired interval at c1 holds 1.0
    "1xgpu mbs64 delay0us": (
        450,
        19000,
        9,
        0,
        0,
    ),  # slower at 1 client; near the client's ceiling at 64
    "2xgpu mbs64 delay0us": (700, 8000, 9, 5, 0),  # failed requests
}
NOISE = {"2xgpu mbs16 delay0us": 0.06}  # its paired 1-client ratio (605 / 600) is inside that noise


def _measure(candidate, load):
    c1, c64, p99, errors, mismatches = SURFACE[candidate.label]
    top = load == "c64"
    return search.Point(
        load,
        c64 if top else c1,
        p99 if top else 2.0,
        errors=errors,
        mismatches=mismatches if top else 0,
        extra={"requests": 1000, "stable": True},
    )


def _confirm(candidate):
    import numpy as np

    rng = np.random.default_rng(0)
    noise = NOISE.get(candidate.label, 0.01)
    decisions = []
    for index, load in enumerate(LOADS):
        true = SURFACE[candidate.label][index] / SURFACE["default"][index]
        default = list(1000 * (1 + noise * rng.standard_normal(5)))
        mine = list(1000 * true * (1 + noise * rng.standard_normal(5)))
        decisions.append(Decision("throughput", load, 1.0, ratio_interval(mine, default, 0.9)))
    return decisions


TUNE = Tune(
    batch_sizes=[8, 16, 64],
    instance_counts=[1, 2],
    max_queue_delay_us=[0],
    concurrency=[1, 64],
    sla_p99_ms=50,
)


def test_every_candidate_not_chosen_is_listed_with_its_cause_and_what_decided_it():
    grid = _grid(TUNE)
    ev = search.Evaluator(
        _measure, LOADS, sla_p99_ms=50, min_vs_default=1.0, exact_under_load=True, confirm=_confirm
    )

    def verify(candidate):
        return None

    winner = search.brute(ev, grid, grid.default, verify)
    assert winner.label == "1xgpu mbs16 delay0us"
    answers = {"1xgpu mbs8 delay0us": {"compared": 2000, "differing": 40}}
    report = _report(ev, grid, winner, TUNE, answers=answers)
    causes = {entry["label"]: entry for entry in report["rejections"]}
    measured = {candidate.label for candidate, _load in ev.order}
    assert set(causes) == measured - {winner.label, "default"}  # every one, none twice
    assert causes["1xgpu mbs8 delay0us"]["cause"] == "not_bit_exact"
    assert (
        causes["2xgpu mbs8 delay0us"]["cause"] == "sla"
        and "SLA 50 ms" in causes["2xgpu mbs8 delay0us"]["detail"]
    )
    assert causes["2xgpu mbs64 delay0us"]["cause"] == "failed_requests"
    assert causes["1xgpu mbs64 delay0us"]["cause"] == "slower_than_default"
    assert causes["1xgpu mbs64 delay0us"]["decided_by"] == "screening reading"
    noisy = causes["2xgpu mbs16 delay0us"]
    assert noisy["cause"] == "slower_than_default" and noisy["decided_by"] == "paired interval"
    assert (
        noisy["decisions"][0]["outcome"] == "inside noise" and noisy["decisions"][0]["load"] == "c1"
    )
    assert "decided inside noise" in noisy["detail"] and "rounds" in noisy["detail"]
    runner_up = causes["2xgpu no-batching"]
    assert runner_up["cause"] == "outranked" and runner_up["decided_by"] == "paired interval"
    assert "the runner-up" in runner_up["detail"] and report["pick"]["overlap"] is False
    assert all(entry["rule"] in RULES.values() for entry in report["rejections"])
    assert [entry["label"] for entry in report["rejected_not_bit_exact"]] == ["1xgpu mbs8 delay0us"]
    # per config, not whole-run totals
    assert report["answers"]["1xgpu mbs8 delay0us"] == {"compared": 2000, "differing": 40}
    mbs8 = next(c for c in report["candidates"] if c["label"] == "1xgpu mbs8 delay0us")
    assert mbs8["answers"]["differing"] == 40
    # the winner's ratios come from its paired rounds, with the interval
    assert report["comparison"]["c1"]["decided_by"] == "paired interval"
    assert report["comparison"]["c1"]["low"] > 1.0 and report["default_is_best"] is False
    # 19,000 req/s is within 10 % of the 20,000 req/s ceiling: flagged, and said in the notes
    bound = [m for m in report["measurements"] if m["client_bound"]]
    assert [m["candidate"] for m in bound] == ["1xgpu mbs64 delay0us"]
    assert any(note.startswith("client-bound: 1 measurement") for note in report["notes"])


def test_when_the_default_wins_the_report_says_so_instead_of_ratios_below_one():
    tune = TUNE.model_copy(update={"batch_sizes": [8], "instance_counts": [1]})
    grid = _grid(tune)
    ev = search.Evaluator(
        _measure, LOADS, sla_p99_ms=50, min_vs_default=1.0, exact_under_load=True, confirm=_confirm
    )
    winner = search.brute(ev, grid, grid.default, lambda c: None)
    assert winner == grid.default
    report = _report(ev, grid, winner, tune)
    assert report["default_is_best"] is True and report["verdict"].startswith("the default is best")
    assert (
        report["comparison"] == {}
        and report["high_load_ratio"] is None
        and report["low_load_ratio"] is None
    )
    assert [(r["label"], r["cause"]) for r in report["rejections"]] == [
        ("1xgpu mbs8 delay0us", "not_bit_exact")
    ]


def test_a_config_refused_by_triton_is_listed_as_such():
    grid = _grid(TUNE.model_copy(update={"batch_sizes": [8], "instance_counts": [1]}))
    refused = grid.at(0, 1)
    ev = search.Evaluator(_measure, LOADS, sla_p99_ms=50, min_vs_default=1.0, exact_under_load=True)
    search.brute(ev, grid, grid.default, lambda c: None)
    report = _report(
        ev, grid, grid.default, TUNE, load_errors={refused: "Triton refused the config: bad"}
    )
    assert report["rejections"][0] == {
        "label": refused.label,
        "cause": "load_refused",
        "rule": RULES["load_refused"],
        "decided_by": "Triton",
        "detail": "Triton refused the config: bad",
    }


def test_a_finalist_left_unconfirmed_is_listed_as_such(monkeypatch):
    monkeypatch.setattr(search, "FINALISTS", 1)
    grid = _grid(TUNE)
    ev = search.Evaluator(
        _measure, LOADS, sla_p99_ms=50, min_vs_default=1.0, exact_under_load=True, confirm=_confirm
    )
    winner = search.brute(ev, grid, grid.default, lambda c: None)
    report = _report(ev, grid, winner, TUNE)
    left = [entry for entry in report["rejections"] if entry["cause"] == "not_confirmed"]
    assert left and all(
        entry["decided_by"] == "budget" and entry["rule"] == RULES["not_confirmed"]
        for entry in left
    )


def _scaling(candidate, load):
    """Batching multiplies the top load's throughput; at 1 client one instance gains, two lose (the H200's shape)."""
    if candidate.is_default:
        value = 600 if load == "c1" else 1000
    elif load == "c1":
        value = 700 if candidate.instances == 1 else 500
    else:
        value = (
            1000 * (1 + candidate.max_batch_size / 8 * candidate.instances)
            - candidate.max_queue_delay_us
        )
    return search.Point(load, value, 5.0, extra={"requests": 1000, "stable": True})


def test_a_config_quick_search_never_measured_at_every_load_is_not_called_outranked():
    """A config faster than the winner at the top load that quick left unmeasured at a lower load (its budget ran
    out, or a config of its size with fewer instances and no longer delay already lost there) is listed as
    not measured, with the reason; it was not outranked."""
    tune = TUNE.model_copy(
        update={
            "batch_sizes": [8, 16, 64],
            "instance_counts": [1, 2],
            "max_queue_delay_us": [0, 500],
        }
    )
    grid = _grid(tune)
    ev = search.Evaluator(_scaling, LOADS, sla_p99_ms=50, min_vs_default=1.0, exact_under_load=True)
    winner = quick.quick(ev, grid, grid.default, lambda c: None, budget=7)
    report = _report(ev, grid, winner, tune)
    causes = {entry["label"]: entry for entry in report["rejections"]}
    assert (
        winner.is_default
    )  # 2 x 64 lost at 1 client, and the budget ran out before 1 x 64 was measured there
    assert causes["2xgpu mbs64 delay0us"]["cause"] == "slower_than_default"
    budget = causes["1xgpu mbs64 delay0us"]
    assert (budget["cause"], budget["decided_by"], budget["rule"]) == (
        "not_measured",
        "quick search",
        RULES["not_measured"],
    )
    assert (
        budget["detail"]
        == "9000 req/s at c64, not measured at c1: quick search's budget of 7 measurements ran out"
    )


def test_quick_keeps_room_for_the_next_finalists_when_the_fastest_lose_at_a_lower_load():
    """The H200's bucket run: the walks at the top load used quick search's budget, the fastest configs (more
    instances) lost at 1 client, and no config was chosen although one instance of the same size passed. The
    walks now leave room for the finalists' other loads: 1 x 64 is measured at 1 client and chosen (with a
    budget of 10 the walks took all of it before)."""
    tune = TUNE.model_copy(
        update={
            "batch_sizes": [8, 16, 64],
            "instance_counts": [1, 2],
            "max_queue_delay_us": [0, 500],
        }
    )
    for budget in (10, 13):
        grid = _grid(tune)
        ev = search.Evaluator(
            _scaling, LOADS, sla_p99_ms=50, min_vs_default=1.0, exact_under_load=True
        )
        winner = quick.quick(ev, grid, grid.default, lambda c: None, budget=budget)
        assert winner.label == "1xgpu mbs64 delay0us" and ev.count <= budget
        causes = {entry["label"]: entry for entry in _report(ev, grid, winner, tune)["rejections"]}
        assert (
            causes["2xgpu mbs64 delay0us"]["cause"] == "slower_than_default"
        )  # faster at c64, lost at c1
        assert all(
            entry["cause"] != "outranked"
            for entry in causes.values()  # only slower ones are outranked
            if _scaling(grid.at(*_coords(grid, entry["label"])), "c64").throughput > 9000
        )
    doomed = causes[
        "2xgpu mbs64 delay500us"
    ]  # budget 13: the delays measured at c64, then left out at c1
    assert doomed["cause"] == "not_measured" and doomed["detail"] == (
        "16500 req/s at c64, not measured at c1: a config of its batch size with no more instances and no longer "
        "delay already lost to the default at a lower load"
    )


def _coords(grid, label: str) -> tuple[int, int, int, int]:
    return next(candidate.coords for candidate in grid.all() if candidate.label == label)


def test_served_bits_of_the_plain_default_do_not_claim_invariance_by_construction():
    """--baseline plain, the default wins: the model without its buckets serves other bits than the bucketed
    goldens (a new version), invariant only as measured for one-row requests, and the text says so."""
    grid = _grid(Tune(determinism="invariant", buckets=[64], baseline="plain"))
    bits = served_bits(SimpleNamespace(version=1), grid.default, {"default": 8})
    assert bits["changed"] and bits["version"] == 2
    assert (
        "one-row requests" in bits["text"]
        and "do not depend on batch composition" not in bits["text"]
    )
    batching = served_bits(SimpleNamespace(version=1), grid.at(0, 1), {grid.at(0, 1).label: 3})
    assert "do not depend on batch composition or load" in batching["text"]
