"""Quick search (Model Analyzer's quick-search idea, adapted), within a hard budget of a quarter of
the grid's measurements: at the top load, a forward walk over the batch sizes of one instance, then
over the instance counts of the best bit-exact size (these walks leave room for four finalists'
other loads); the default once more; then the other loads and the goldens for the finalists, best
first; then, while the budget lasts, the queue delays and the neighbouring sizes and counts of the
chosen point. The throughput surface is close to unimodal along each axis (a larger batch or more
instances help until the device, the scheduler or the client saturates), which makes a forward walk
sound; the bits depend on the batch shape, not on the instance count, so a size whose answers
differed is not tried again; the low-load cost of a config grows with its instances and its delay,
so the finalists are checked there best first and the delays last.
"""

from __future__ import annotations

from tritonbuild.tune.search import FINALISTS, Evaluator, settle
from tritonbuild.tune.space import Candidate, Grid

IMPROVE = 1.02  # a step must gain 2 % at the top load (measurement noise is ~1-3 %)
# quick search's measurements, Triton's default's included, over the grid's (brute's)
QUICK_SHARE = 0.25


def quick_budget(grid_measurements: int, n_loads: int) -> int:
    """The most measurements quick search makes: a quarter of the grid's, but on a tiny grid never
    fewer than the default twice and two candidates at every load."""
    return max(int(QUICK_SHARE * grid_measurements), 4 * n_loads)


def quick(
    ev: Evaluator, grid: Grid, default: Candidate, verify, budget: int | None = None
) -> Candidate | None:
    """At most `budget` measurements (default: a quarter of the grid's, Triton's default and its
    re-measurement included; quick_budget). See the module docstring for the walk and README's Tune
    section for why."""
    return QuickSearch(ev, grid, default, verify, budget).run()


class QuickSearch:
    """Quick search's state and its phases, one method each (the order is `run`)."""

    def __init__(
        self, ev: Evaluator, grid: Grid, default: Candidate, verify, budget: int | None = None
    ):
        n_loads = len(ev.loads)
        self.ev, self.grid, self.default, self.verify = ev, grid, default, verify
        self.budget = budget or quick_budget(len({default, *grid.all()}) * n_loads, n_loads)
        # the screening walks leave room for FINALISTS candidates' other loads: when the fastest at
        # the top load lose at a lower one, the next ones are still measured there (on the H200 a
        # run whose walks used the budget found no config at all, its neighbours passing) (never so
        # much that the walks lose the default and two candidates at every load: 3 x n_loads)
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
        """The candidate's answers differed from the goldens under load (when the recipe requires
        invariance)."""
        ev = self.ev
        return ev.exact_under_load and any(
            ev.results[(candidate, load)].mismatches
            for load in ev.loads
            if (candidate, load) in ev.results
        )

    def measured_top(self, candidate: Candidate) -> bool:
        return (candidate, self.ev.top) in self.ev.results

    # 1. the batch sizes of the first instance count (no delay), at the top load, smallest first,
    #    until one no longer gains 2 % and a bit-exact one has been seen. The shape decides the
    #    kernels and so the bits (on the H200 fixed-shape benchmark every max_batch_size below 128
    #    changed them): a size whose answers differ is never a finalist, and it is not tried again
    #    with more instances.
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
        """A config of the same size with no more instances and no longer delay already lost to the
        default at a lower load: more instances and a longer delay only add low-load cost (seen on
        the H200)."""
        return any(
            lost.max_batch_size == candidate.max_batch_size
            and lost.batching == candidate.batching
            and lost.instances <= candidate.instances
            and lost.max_queue_delay_us <= candidate.max_queue_delay_us
            for lost in self.slow
        )

    def accept(self, candidate: Candidate) -> bool:
        """Measure candidate at the other loads and verify it with the goldens; True when it is
        chosen."""
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
        """The chosen point's queue delays and preferred sizes, then the neighbouring batch sizes
        and instance counts, diagonals included (more instances of a smaller batch often beat one
        instance of a larger)."""
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

    # 5. around the chosen point, while the budget lasts (bit-exact sizes only); a point is checked
    #    at the other loads only when it beats the chosen one by 2 % at the top load.
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
