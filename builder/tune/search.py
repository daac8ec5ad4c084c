"""Which candidates to measure, and which one wins.

Objective: the highest throughput at the top of the load range among candidates that, at EVERY load of the
range, answered without errors, met the p99 SLA, served at least `min_vs_default` × Triton's default, and
(per the recipe's batch_invariance) gave the goldens' bits; the finalist is then verified with the goldens
(repeats and batch composition) before it is chosen.

Quick search (Model Analyzer's quick-search idea, adapted), within a hard budget of a quarter of the grid's
measurements: at the top load, a forward walk over the batch sizes of one instance, then over the instance counts of
the best bit-exact size (these walks leave room for four finalists' other loads); the default once more; then the
other loads and the goldens for the finalists, best first; then, while the budget lasts, the queue delays and the
neighbouring sizes and counts of the chosen point. The throughput surface is close to unimodal along each axis (a
larger batch or more instances help until the device, the scheduler or the client saturates), which makes a forward
walk sound; the bits depend on the batch shape, not on the instance count, so a size whose answers differed is not
tried again; the low-load cost of a config grows with its instances and its delay, so the finalists are checked
there best first and the delays last. `--brute` measures every candidate at every load.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tritonbuild.tune.confidence import Decision
from tritonbuild.tune.space import Candidate, Grid

IMPROVE = 1.02  # a step must gain 2 % at the top load (measurement noise is ~1-3 %)
QUICK_SHARE = (
    0.25  # quick search's measurements, Triton's default's included, over the grid's (brute's)
)
# With paired confirmation on, one screening reading only discards a config more than 10 % below the rule (the
# H200's 1-client readings of one config moved by up to a third within a run); the interval decides the rest.
SCREEN_SLACK = 0.10
FINALISTS = (
    4  # candidates measured in paired rounds at most (each costs 2 x rounds x loads measurements)
)


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
            floor = self.min_vs_default * (1 - SCREEN_SLACK if self.confirm is not None else 1)
            if point.throughput < floor * base:
                out.append(
                    f"{point.throughput:.0f} req/s < {floor:.3g} × default {base:.0f} at {load}"
                )
        return out

    def confirmed(self, candidate: Candidate) -> str | None:
        """None when every rule decided on paired rounds against the default passes (or confirmation is off);
        else the rules that did not pass, each with its interval."""
        if self.confirm is None or candidate.is_default:
            return None
        if candidate not in self.decisions:
            self.decisions[candidate] = self.confirm(candidate)
        failed = [decision for decision in self.decisions[candidate] if not decision.passed]
        return "; ".join(decision.describe() for decision in failed) or None

    def settled(self, candidate: Candidate, verify: Callable[[Candidate], str | None]) -> bool:
        """The rules on paired rounds, then the goldens; a failure is kept in `rejected` with what decided it.
        At most FINALISTS candidates are measured in paired rounds: a later one is left unconfirmed (said so)."""
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
        """The paired throughput ratio at the top load (the screening ratio when confirmation is off)."""
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
    """The first of `ranked` (best first) feasible at every load, confirmed against the default on paired
    rounds and verified with the goldens; then the next such one, and the better of the two on paired rounds."""
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
    """Feasible on its screening readings, then the rules on paired rounds, then the goldens (the reason of a
    rejection is kept in ev.rejected)."""
    if candidate in ev.rejected or not ev.verdict(candidate).feasible:
        return False
    return ev.settled(candidate, verify)


def settle(ev: Evaluator, first: Candidate, second: Candidate) -> Candidate:
    """Two finalists that both pass: the one with the higher paired ratio at the top load (the other is kept as
    the runner-up; the report says whether their intervals overlap)."""
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


def quick(
    ev: Evaluator, grid: Grid, default: Candidate, verify, budget: int | None = None
) -> Candidate | None:
    """At most `budget` measurements (default: a quarter of the grid's, Triton's default and its re-measurement
    included; quick_budget). See the module docstring for the walk and README's Tune section for why."""
    return QuickSearch(ev, grid, default, verify, budget).run()


class QuickSearch:
    """Quick search's state and its phases, one method each (the order is `run`)."""

    def __init__(
        self, ev: Evaluator, grid: Grid, default: Candidate, verify, budget: int | None = None
    ):
        n_loads = len(ev.loads)
        self.ev, self.grid, self.default, self.verify = ev, grid, default, verify
        self.budget = budget or quick_budget(len({default, *grid.all()}) * n_loads, n_loads)
        # the screening walks leave room for FINALISTS candidates' other loads: when the fastest at the top
        # load lose at a lower one, the next ones are still measured there (on the H200 a run whose walks used
        # the budget found no config at all, its neighbours passing)
        # (never so much that the walks lose the default and two candidates at every load: 3 x n_loads)
        self.reserve = min(FINALISTS * (n_loads - 1), max(0, self.budget - 3 * n_loads))
        self.delay = (
            0  # the walk's queue delay: the shortest (the others are measured at the best point)
        )
        self.shape = 0
        self.chosen: Candidate | None = None
        self.slow: list[Candidate] = []  # lost to the default at a lower load

    def run(self) -> Candidate | None:
        ev = self.ev
        ev.default = self.default
        for load in ev.loads:
            ev.get(self.default, load)
        self.walk_batch_sizes()
        self.walk_instances()
        self.try_delays()
        if self.room(
            len(ev.loads) + self.reserve
        ):  # Triton's default once more: the better of the two is the baseline
            ev.remeasure_default()
        self.pick_finalist()
        self.improve_around_chosen()
        if self.chosen is None and ev.verdict(self.default).feasible:
            return self.default
        return self.chosen

    # measurements and what they say
    def room(self, n: int = 1) -> bool:
        return self.ev.count + n <= self.budget

    def screening_room(self, n: int = 1) -> bool:
        """Room for a screening measurement at the top load, the finalists' reserve kept."""
        return self.room(n + self.reserve)

    def raw(self, candidate: Candidate) -> float:
        point = self.ev.get(candidate, self.ev.top)
        return 0.0 if point.errors else point.throughput

    def unsafe(self, candidate: Candidate) -> bool:
        """The candidate's answers differed from the goldens under load (when the recipe requires invariance)."""
        ev = self.ev
        return ev.exact_under_load and any(
            ev.results[(candidate, load)].mismatches
            for load in ev.loads
            if (candidate, load) in ev.results
        )

    def measured_top(self, candidate: Candidate) -> bool:
        return (candidate, self.ev.top) in self.ev.results

    # 1. the batch sizes of the first instance count (no delay), at the top load, smallest first, until one no
    #    longer gains 2 % and a bit-exact one has been seen. The shape decides the kernels and so the bits
    #    (on the H200 fixed-shape benchmark every max_batch_size below 128 changed them): a size whose answers
    #    differ is never a finalist, and it is not tried again with more instances.
    def walk_batch_sizes(self) -> None:
        grid, delay = self.grid, self.delay
        best_seen = self.raw(self.default)
        for b in range(1, len(grid.batch)):
            if not self.screening_room():
                break
            v = self.raw(grid.at(0, b, delay))
            if v >= best_seen * IMPROVE:
                best_seen = v
                continue
            if any(not self.unsafe(grid.at(0, x, delay)) for x in range(1, b + 1)):
                break
        shapes = [
            b
            for b in range(len(grid.batch))
            if self.measured_top(grid.at(0, b, delay)) and not self.unsafe(grid.at(0, b, delay))
        ]
        self.shape = max(shapes, key=lambda b: self.raw(grid.at(0, b, delay)), default=0)

    # 2. more instances of the best bit-exact size, while they gain 2 % at the top load.
    def walk_instances(self) -> None:
        grid, shape, delay = self.grid, self.shape, self.delay
        for i in range(1, len(grid.instances)):
            prev = self.raw(grid.at(i - 1, shape, delay))
            if not self.screening_room():
                break
            if self.raw(grid.at(i, shape, delay)) < prev * IMPROVE:
                break

    # 2b. the queue delays and preferred sizes of the best point so far, at the top load.
    def try_delays(self) -> None:
        grid, shape, delay = self.grid, self.shape, self.delay
        if shape == 0:
            return
        i_best = max(
            range(len(grid.instances)),
            key=lambda i: (
                self.raw(grid.at(i, shape, delay))
                if self.measured_top(grid.at(i, shape, delay))
                else -1.0
            ),
        )
        for d in range(len(grid.delays)):
            for p in range(len(grid.preferred)):
                if self.screening_room(1 + len(self.ev.loads)):
                    self.raw(grid.at(i_best, shape, d, p))

    def doomed(self, candidate: Candidate) -> bool:
        """A config of the same size with no more instances and no longer delay already lost to the default
        at a lower load: more instances and a longer delay only add low-load cost (seen on the H200)."""
        return any(
            lost.max_batch_size == candidate.max_batch_size
            and lost.batching == candidate.batching
            and lost.instances <= candidate.instances
            and lost.max_queue_delay_us <= candidate.max_queue_delay_us
            for lost in self.slow
        )

    def accept(self, candidate: Candidate) -> bool:
        """Measure candidate at the other loads and verify it with the goldens; True when it is chosen."""
        ev = self.ev
        if self.unsafe(candidate) or candidate in ev.rejected or ev.top_score(candidate) is None:
            return False
        missing = sum(1 for lo in ev.loads if (candidate, lo) not in ev.results)
        if self.doomed(candidate) or not self.room(missing):
            ev.skipped.setdefault(
                candidate,
                "a config of its batch size with no more instances and no longer delay "
                "already lost to the default at a lower load"
                if self.doomed(candidate)
                else f"quick search's budget of {self.budget} measurements ran out",
            )
            return False
        if not ev.verdict(candidate).feasible:
            reasons = ev.verdict(candidate).reasons
            if any(
                reason.endswith(f" at {load}") and "default" in reason
                for reason in reasons
                for load in ev.loads[:-1]
            ):
                self.slow.append(candidate)
            return False
        if not ev.settled(candidate, self.verify):
            if ev.rules.get(candidate) == "paired" and any(
                f" at {load}:" in ev.rejected[candidate] for load in ev.loads[:-1]
            ):
                self.slow.append(candidate)
            return False
        self.chosen = candidate
        return True

    # 4. finalists, best at the top load first: the other loads, then the goldens.
    def pick_finalist(self) -> None:
        ev = self.ev
        ranked = sorted(
            {
                candidate
                for candidate, load in ev.order
                if load == ev.top and candidate != self.default
            },
            key=lambda candidate: -self.raw(candidate),
        )
        accepted = next((n for n, candidate in enumerate(ranked) if self.accept(candidate)), None)
        if accepted is None or ev.confirm is None:
            return
        first = (
            self.chosen
        )  # with paired confirmation: the next finalist too, and the better of the two
        for candidate in ranked[accepted + 1 :]:
            if self.accept(candidate):
                self.chosen = settle(ev, first, candidate)
                return

    def neighbours(
        self, chosen: Candidate, tried: set[Candidate], bad_shapes: set[int]
    ) -> list[Candidate]:
        """The chosen point's queue delays and preferred sizes, then the neighbouring batch sizes and instance
        counts, diagonals included (more instances of a smaller batch often beat one instance of a larger)."""
        grid = self.grid
        i, b, d, p = chosen.coords
        near = [
            grid.at(i, b, dd, pp)
            for dd in range(len(grid.delays))
            for pp in range(len(grid.preferred))
        ]
        near += [
            grid.at(ii, bb, d, p)
            for ii, bb in (
                (i + 1, b),
                (i + 1, b - 1),
                (i, b + 1),
                (i, b - 1),
                (i - 1, b + 1),
                (i - 1, b),
            )
            if grid.valid(ii, bb) and bb > 0
        ]
        return [
            candidate
            for candidate in near
            if candidate != chosen
            and candidate not in tried
            and candidate.max_batch_size not in bad_shapes
        ]

    # 5. around the chosen point, while the budget lasts (bit-exact sizes only); a point is checked at the
    #    other loads only when it beats the chosen one by 2 % at the top load.
    def improve_around_chosen(self) -> None:
        tried: set[Candidate] = set()
        bad_shapes = {
            candidate.max_batch_size
            for candidate, _lo in self.ev.order
            if candidate.batching and self.unsafe(candidate)
        }
        while self.chosen is not None and self.chosen.coords is not None:
            chosen, moved = self.chosen, False
            for candidate in self.neighbours(chosen, tried, bad_shapes):
                tried.add(candidate)
                if not self.measured_top(candidate):
                    if not self.room():
                        return
                    self.raw(candidate)
                    if self.unsafe(candidate):
                        bad_shapes.add(candidate.max_batch_size)
                        continue
                if self.raw(candidate) >= self.raw(chosen) * IMPROVE and self.accept(candidate):
                    self.chosen = (
                        settle(self.ev, chosen, candidate) if self.ev.confirm else candidate
                    )
                    moved = self.chosen != chosen
                    break
            if not moved:
                break
