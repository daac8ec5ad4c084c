"""Which candidates to measure, and which one wins.

Objective: the highest throughput at the top of the load range among candidates that, at EVERY load
of the range, answered without errors, met the p99 SLA, served at least `min_vs_default` × Triton's
default, and (per the recipe's batch_invariance) gave the goldens' bits; the finalist is then
verified with the goldens (repeats and batch composition) before it is chosen.

Quick search is tune/quick.py; `--brute` (brute here) measures every candidate at every load.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tritonbuild.tune.confidence import Decision
from tritonbuild.tune.space import Candidate, Grid

# With paired confirmation on, one screening reading only discards a config more than 10 % below the
# rule (the H200's 1-client readings of one config moved by up to a third within a run); the
# interval decides the rest.
SCREEN_SLACK = 0.10
FINALISTS = (
    4  # candidates measured in paired rounds at most (each costs 2 x rounds x loads measurements)
)


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

    def __init__(
        self,
        measure: Callable[[Candidate, str], Point],
        loads: list[str],
        *,
        sla_p99_ms: float | None,
        min_vs_default: float,
        exact_under_load: bool,
        confirm: Callable[[Candidate], list[Decision]] | None = None,
    ):
        self._measure = measure
        self.confirm = (
            confirm  # paired, interleaved rounds against the default at every load (None: off)
        )
        self.decisions: dict[Candidate, list[Decision]] = {}
        self.runner_up: Candidate | None = None
        self.loads = loads
        self.top = loads[-1]
        self.sla = sla_p99_ms
        self.min_vs_default = min_vs_default
        self.exact_under_load = exact_under_load
        self.results: dict[tuple[Candidate, str], Point] = {}
        self.order: list[tuple[Candidate, str]] = []
        self.default: Candidate | None = None
        self.rejected: dict[Candidate, str] = {}
        self.rules: dict[
            Candidate, str
        ] = {}  # what decided a rejection: "paired" (interval) or "goldens"
        self.skipped: dict[
            Candidate, str
        ] = {}  # quick search: why a config was not measured at every load
        self.default_again: dict[str, Point] = {}

    @property
    def count(self) -> int:
        return len(self.results) + len(self.default_again)

    def remeasure_default(self) -> None:
        """Triton's default once more at every load, after the search: the baseline a candidate must
        not lose to is the better of the two (on the H200 one low-load measurement of the same
        config varied 618-920 req/s between runs; a lucky low baseline must not let a slower config
        through)."""
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
            floor = self.min_vs_default * (1 - SCREEN_SLACK if self.confirm is not None else 1)
            if point.throughput < floor * base:
                out.append(
                    f"{point.throughput:.0f} req/s < {floor:.3g} × default {base:.0f} at {load}"
                )
        return out

    def confirmed(self, candidate: Candidate) -> str | None:
        """None when every rule decided on paired rounds against the default passes (or confirmation
        is off); else the rules that did not pass, each with its interval."""
        if self.confirm is None or candidate.is_default:
            return None
        if candidate not in self.decisions:
            self.decisions[candidate] = self.confirm(candidate)
        failed = [decision for decision in self.decisions[candidate] if not decision.passed]
        return "; ".join(decision.describe() for decision in failed) or None

    def settled(self, candidate: Candidate, verify: Callable[[Candidate], str | None]) -> bool:
        """The rules on paired rounds, then the goldens; a failure is kept in `rejected` with what
        decided it. At most FINALISTS candidates are measured in paired rounds: a later one is left
        unconfirmed (said so)."""
        if (
            self.confirm is not None
            and not candidate.is_default
            and candidate not in self.decisions
            and len(self.decisions) >= FINALISTS
        ):
            self.rejected[candidate], self.rules[candidate] = (
                (f"not confirmed: {FINALISTS} finalists were already measured in paired rounds"),
                "unconfirmed",
            )
            return False
        for rule, check in (("paired", self.confirmed), ("goldens", verify)):
            why = check(candidate)
            if why is not None:
                self.rejected[candidate], self.rules[candidate] = why, rule
                return False
        return True

    def top_ratio(self, candidate: Candidate) -> float:
        """The paired throughput ratio at the top load (the screening ratio when confirmation is
        off)."""
        decision = next((d for d in self.decisions.get(candidate, []) if d.load == self.top), None)
        if decision is not None:
            return decision.interval.ratio
        base = self.baseline(self.top)
        return self.get(candidate, self.top).throughput / base if base else 0.0

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


def choose(
    ev: Evaluator, ranked: list[Candidate], verify: Callable[[Candidate], str | None]
) -> Candidate | None:
    """The first of `ranked` (best first) feasible at every load, confirmed against the default on
    paired rounds and verified with the goldens; then the next such one, and the better of the two
    on paired rounds."""
    chosen = None
    for candidate in ranked:
        if passes(ev, candidate, verify):
            if chosen is not None:
                return settle(ev, chosen, candidate)
            chosen = candidate
            if ev.confirm is None:
                return chosen
    return chosen


def passes(ev: Evaluator, candidate: Candidate, verify: Callable[[Candidate], str | None]) -> bool:
    """Feasible on its screening readings, then the rules on paired rounds, then the goldens (the
    reason of a rejection is kept in ev.rejected)."""
    if candidate in ev.rejected or not ev.verdict(candidate).feasible:
        return False
    return ev.settled(candidate, verify)


def settle(ev: Evaluator, first: Candidate, second: Candidate) -> Candidate:
    """Two finalists that both pass: the one with the higher paired ratio at the top load (the other
    is kept as the runner-up; the report says whether their intervals overlap)."""
    best, other = sorted((first, second), key=lambda c: -ev.top_ratio(c))
    ev.runner_up = other
    return best


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
