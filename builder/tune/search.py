"""Which candidates to measure, and which one wins.

Objective: the highest throughput at the top of the load range among candidates that, at EVERY load of the
range, answered without errors, met the p99 SLA, served at least `min_vs_default` × Triton's default, and
(per the recipe's batch_invariance) gave the goldens' bits; the finalist is then verified with the goldens
(repeats and batch composition) before it is chosen.

Quick search (Model Analyzer's quick-search idea, adapted): a greedy climb at the top load that only walks
forward (more instances, a larger dynamic batch), then the queue delays and preferred sizes at the best
point, then the other loads only for the few candidates that could win; when the low-load constraint
rejects all of them, a walk over the batch sizes of the fewest instances. The throughput surface of a
serving config is close to unimodal along each of those axes (more instances or a larger batch help until
the device or the scheduler saturates), which is what makes a forward walk sound; the low-load check is
where the delay that pays at high load costs, so it is measured for every finalist. `--brute` measures
every candidate at every load, to check the claim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tritonbuild.tune.space import Candidate, Grid

IMPROVE = 1.02  # a step must gain 2 % at the top load (measurement noise is ~1-3 %)
QUICK_SHARE = 0.25  # quick search's measurements, Triton's default's included, over the grid's (brute's)


def quick_budget(grid_measurements: int, n_loads: int) -> int:
    """The most measurements quick search makes: a quarter of the grid's, but on a tiny grid never fewer than
    the default twice and two candidates at every load."""
    return max(int(QUICK_SHARE * grid_measurements), 4 * n_loads)


@dataclass
class Point:
    load: str
    throughput: float
    p99_ms: float
    errors: int = 0
    mismatches: int = 0
    extra: dict = field(default_factory=dict)


@dataclass
class Verdict:
    candidate: Candidate
    feasible: bool
    reasons: list[str]


class Evaluator:
    """Caches measurements; `count` is the number of (candidate, load) measurements made."""

    def __init__(self, measure: Callable[[Candidate, str], Point], loads: list[str], *, sla_p99_ms: float | None,
                 min_vs_default: float, exact_under_load: bool):
        self._measure = measure
        self.loads = loads
        self.top = loads[-1]
        self.sla = sla_p99_ms
        self.min_vs_default = min_vs_default
        self.exact_under_load = exact_under_load
        self.results: dict[tuple[Candidate, str], Point] = {}
        self.order: list[tuple[Candidate, str]] = []
        self.default: Candidate | None = None
        self.rejected: dict[Candidate, str] = {}
        self.default_again: dict[str, Point] = {}

    @property
    def count(self) -> int:
        return len(self.results) + len(self.default_again)

    def remeasure_default(self) -> None:
        """Triton's default once more at every load, after the search: the baseline a candidate must not lose
        to is the better of the two (on the H200 one low-load measurement of the same config varied 618-920
        req/s between runs; a lucky low baseline must not let a slower config through)."""
        for load in self.loads:
            if load not in self.default_again:
                self.default_again[load] = self._measure(self.default, load)

    def baseline(self, load: str) -> float:
        first = self.get(self.default, load).throughput
        again = self.default_again.get(load)
        return max(first, again.throughput) if again is not None else first

    def get(self, candidate: Candidate, load: str) -> Point:
        key = (candidate, load)
        if key not in self.results:
            self.results[key] = self._measure(candidate, load)
            self.order.append(key)
        return self.results[key]

    def problems(self, candidate: Candidate, load: str) -> list[str]:
        """Why candidate fails at this load (measuring it if needed); [] when it passes."""
        point = self.get(candidate, load)
        out = []
        if point.errors:
            out.append(f"{point.errors} failed requests at {load}")
        if self.sla is not None and not point.p99_ms <= self.sla:
            out.append(f"p99 {point.p99_ms:.2f} ms > SLA {self.sla:g} ms at {load}")
        if point.mismatches and self.exact_under_load:
            out.append(f"{point.mismatches} answers differ from the goldens at {load}")
        if self.default is not None and candidate != self.default:
            base = self.baseline(load)
            if point.throughput < self.min_vs_default * base:
                out.append(f"{point.throughput:.0f} req/s < {self.min_vs_default:g} × default {base:.0f} at {load}")
        return out

    def top_score(self, candidate: Candidate) -> float | None:
        """Throughput at the top load, or None when candidate already fails there."""
        if candidate in self.rejected or self.problems(candidate, self.top):
            return None
        return self.get(candidate, self.top).throughput

    def verdict(self, candidate: Candidate) -> Verdict:
        reasons = [reason for load in self.loads for reason in self.problems(candidate, load)]
        if candidate in self.rejected:
            reasons.append(self.rejected[candidate])
        return Verdict(candidate, not reasons, reasons)


def choose(ev: Evaluator, ranked: list[Candidate], verify: Callable[[Candidate], str | None]) -> Candidate | None:
    """The first of `ranked` (best first) feasible at every load whose goldens verification passes."""
    for candidate in ranked:
        if not ev.verdict(candidate).feasible:
            continue
        why = verify(candidate)
        if why is None:
            return candidate
        ev.rejected[candidate] = why
    return None


def brute(ev: Evaluator, grid: Grid, default: Candidate, verify) -> Candidate | None:
    ev.default = default
    for load in ev.loads:
        ev.get(default, load)
    cands = [default, *[candidate for candidate in grid.all() if candidate != default]]
    for candidate in cands:
        for load in ev.loads:
            ev.get(candidate, load)
    ev.remeasure_default()
    ranked = sorted(cands, key=lambda candidate: -ev.get(candidate, ev.top).throughput)
    return choose(ev, ranked, verify)


def quick(ev: Evaluator, grid: Grid, default: Candidate, verify) -> Candidate | None:
    ev.default = default
    for load in ev.loads:
        ev.get(default, load)
    # 1. forward climb over (instances, batch size) at the top load, with the first delay / preferred value.
    #    The climb follows raw throughput (a point over the SLA can lead to one under it); the constraints
    #    decide among the finalists.
    def raw(candidate: Candidate) -> float:
        point = ev.get(candidate, ev.top)
        return 0.0 if point.errors else point.throughput

    cur = (0, 0)
    cur_score = raw(grid.at(*cur))
    while True:
        steps = [s for s in [(cur[0] + 1, cur[1]), (cur[0], cur[1] + 1)] if grid.valid(*s)]
        if not steps:
            break
        best_v, best_s = max((raw(grid.at(*s)), s) for s in steps)
        if best_v < cur_score * IMPROVE:
            break
        cur, cur_score = best_s, best_v
    # 2. the queue delays and preferred sizes at that point.
    i, b = cur
    if b > 0:
        for d in range(len(grid.delays)):
            for p in range(len(grid.preferred)):
                raw(grid.at(i, b, d, p))
    # 3. finalists: the best at the top load, checked at every other load against the default measured
    #    again, then verified with the goldens.
    ev.remeasure_default()
    measured = {candidate for candidate, load in ev.order if load == ev.top and candidate != default}
    ranked = sorted(measured, key=lambda candidate: -(ev.top_score(candidate) or -1.0))
    ranked = [candidate for candidate in ranked if ev.top_score(candidate) is not None] + [default]
    choice = choose(ev, ranked, verify)
    if choice is ranked[0]:
        return choice
    # 4. the constraints rejected the best climbed finalists (the climb follows the top load, where more
    #    instances win; at low load they cost most): walk the batch sizes (no delay) of each instance count,
    #    fewest first, measuring the other loads only for points that would beat the best feasible one so far
    #    (seen on the H200: 1 instance with batches <= 32 kept 0.85x of the default at 1 client where the
    #    climbed 2- and 4-instance configs lost more).
    best = choice
    for i in range(len(grid.instances)):
        for b in range(1, len(grid.batch)):
            candidate = grid.at(i, b)
            score = ev.top_score(candidate)
            if score is None or (best is not None and score <= ev.get(best, ev.top).throughput):
                continue
            if ev.verdict(candidate).feasible:
                why = verify(candidate)
                if why is None:
                    best = candidate
                else:
                    ev.rejected[candidate] = why
    return best
