"""Which candidates to measure, and which one wins.

Objective: the highest throughput at the top of the load range among candidates that, at EVERY load of the
range, answered without errors, met the p99 SLA, served at least `min_vs_default` × Triton's default, and
(per the recipe's batch_invariance) gave the goldens' bits; the finalist is then verified with the goldens
(repeats and batch composition) before it is chosen.

Quick search (Model Analyzer's quick-search idea, adapted), within a hard budget of a quarter of the grid's
measurements: at the top load, a forward walk over the batch sizes of one instance, then over the instance
counts of the best bit-exact size; the default once more; then the other loads and the goldens for the
finalists, best first; then, while the budget lasts, the queue delays and the neighbouring sizes and counts
of the chosen point. The throughput surface is close to unimodal along each axis (a larger batch or more
instances help until the device, the scheduler or the client saturates), which makes a forward walk sound;
the bits depend on the batch shape, not on the instance count, so a size whose answers differed is not
tried again; the low-load cost of a config grows with its instances and its delay, so the finalists are
checked there best first and the delays last. `--brute` measures every candidate at every load.
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


def quick(ev: Evaluator, grid: Grid, default: Candidate, verify, budget: int | None = None) -> Candidate | None:
    """At most `budget` measurements (default: a quarter of the grid's, Triton's default and its re-measurement
    included; quick_budget). See the module docstring for the walk and README's Tune section for why."""
    loads = len(ev.loads)
    budget = budget or quick_budget(len({default, *grid.all()}) * loads, loads)
    ev.default = default
    for load in ev.loads:
        ev.get(default, load)

    def room(n: int = 1) -> bool:
        return ev.count + n <= budget

    def raw(candidate: Candidate) -> float:
        point = ev.get(candidate, ev.top)
        return 0.0 if point.errors else point.throughput

    def unsafe(candidate: Candidate) -> bool:
        """The candidate's answers differed from the goldens under load (when the recipe requires invariance)."""
        return ev.exact_under_load and any(ev.results[(candidate, load)].mismatches for load in ev.loads
                                           if (candidate, load) in ev.results)

    def measured_top(candidate: Candidate) -> bool:
        return (candidate, ev.top) in ev.results

    # 1. the batch sizes of the first instance count (no delay), at the top load, smallest first, until one no
    #    longer gains 2 % and a bit-exact one has been seen. The shape decides the kernels and so the bits
    #    (on the H200 fixed-shape benchmark every max_batch_size below 128 changed them): a size whose answers
    #    differ is never a finalist, and it is not tried again with more instances.
    best_seen = raw(default)
    delay = 0  # the walk's queue delay: the shortest (the others are measured at the best point, 2b)
    for b in range(1, len(grid.batch)):
        if not room():
            break
        candidate = grid.at(0, b, delay)
        v = raw(candidate)
        if v >= best_seen * IMPROVE:
            best_seen = v
            continue
        if any(not unsafe(grid.at(0, x, delay)) for x in range(1, b + 1)):
            break
    shapes = [b for b in range(len(grid.batch))
              if measured_top(grid.at(0, b, delay)) and not unsafe(grid.at(0, b, delay))]
    shape = max(shapes, key=lambda b: raw(grid.at(0, b, delay)), default=0)
    # 2. more instances of the best bit-exact size, while they gain 2 % at the top load.
    for i in range(1, len(grid.instances)):
        prev = raw(grid.at(i - 1, shape, delay))
        if not room():
            break
        if raw(grid.at(i, shape, delay)) < prev * IMPROVE:
            break
    # 2b. the queue delays and preferred sizes of the best point so far, at the top load.
    if shape > 0:
        i_best = max(range(len(grid.instances)),
                     key=lambda i: raw(grid.at(i, shape, delay)) if measured_top(grid.at(i, shape, delay)) else -1.0)
        for d in range(len(grid.delays)):
            for p in range(len(grid.preferred)):
                if room(1 + loads):
                    raw(grid.at(i_best, shape, d, p))
    # 3. Triton's default once more (the baseline a finalist must not lose to is the better of the two).
    if room(loads):
        ev.remeasure_default()
    # 4. finalists, best at the top load first: the other loads, then the goldens.
    chosen: Candidate | None = None

    slow: list[Candidate] = []  # lost to the default at a lower load

    def doomed(candidate: Candidate) -> bool:
        """A config of the same size with no more instances and no longer delay already lost to the default
        at a lower load: more instances and a longer delay only add low-load cost (seen on the H200)."""
        return any(lost.max_batch_size == candidate.max_batch_size and lost.batching == candidate.batching
                   and lost.instances <= candidate.instances
                   and lost.max_queue_delay_us <= candidate.max_queue_delay_us for lost in slow)

    def accept(candidate: Candidate) -> bool:
        nonlocal chosen
        if unsafe(candidate) or candidate in ev.rejected or ev.top_score(candidate) is None or doomed(candidate):
            return False
        missing = sum(1 for lo in ev.loads if (candidate, lo) not in ev.results)
        if not room(missing):
            return False
        if not ev.verdict(candidate).feasible:
            reasons = ev.verdict(candidate).reasons
            if any(reason.endswith(f" at {load}") and "default" in reason for reason in reasons
                   for load in ev.loads[:-1]):
                slow.append(candidate)
            return False
        why = verify(candidate)
        if why is not None:
            ev.rejected[candidate] = why
            return False
        chosen = candidate
        return True

    ranked = sorted({candidate for candidate, load in ev.order if load == ev.top and candidate != default},
                    key=lambda candidate: -raw(candidate))
    for candidate in ranked:
        if accept(candidate):
            break
    # 5. around the chosen point, while the budget lasts: its queue delays and preferred sizes, then the
    #    neighbouring batch sizes and instance counts, diagonals included (more instances of a smaller batch
    #    often beat one instance of a larger; bit-exact sizes only); a point is checked at the other
    #    loads only when it beats the chosen one by 2 % at the top load.
    tried: set[Candidate] = set()
    bad_shapes = {candidate.max_batch_size for candidate, _lo in ev.order if candidate.batching and unsafe(candidate)}
    while chosen is not None and chosen.coords is not None:
        i, b, d, p = chosen.coords
        near = [grid.at(i, b, dd, pp) for dd in range(len(grid.delays)) for pp in range(len(grid.preferred))]
        near += [grid.at(ii, bb, d, p) for ii, bb in ((i + 1, b), (i + 1, b - 1), (i, b + 1), (i, b - 1),
                                                      (i - 1, b + 1), (i - 1, b))
                 if grid.valid(ii, bb) and bb > 0]
        near = [candidate for candidate in near
                if candidate != chosen and candidate not in tried and candidate.max_batch_size not in bad_shapes]
        moved = False
        for candidate in near:
            tried.add(candidate)
            if not measured_top(candidate):
                if not room():
                    return chosen
                raw(candidate)
                if unsafe(candidate):
                    bad_shapes.add(candidate.max_batch_size)
                    continue
            if raw(candidate) >= raw(chosen) * IMPROVE and accept(candidate):
                moved = True
                break
        if not moved:
            break
    if chosen is None and ev.verdict(default).feasible:
        return default
    return chosen
