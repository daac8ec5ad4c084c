"""What the search asks of a candidate, as callbacks of the tune session: served (a load with a
config override, on the model's own name or the default's twin), measured at a load, confirmed in
paired rounds against Triton's default, verified with the goldens (or, invariant, its own answers
alone). The session (tune/run.py) holds the state they use."""

from __future__ import annotations

import time

from tritonbuild.recipe.models import Tune
from tritonbuild.server.loading import ModelLoadError
from tritonbuild.tune import search
from tritonbuild.tune.confidence import Decision, abba_order, ratio_interval
from tritonbuild.tune.control import load_with_config
from tritonbuild.tune.loadgen import LoadGenerator, Result
from tritonbuild.tune.outputs import append_measurement
from tritonbuild.tune.space import Candidate, apply


class SearchCallbacks:
    """Mixed into TuneSession: slot, ensure, measure, confirm and verify a candidate."""

    def slot(self, candidate: Candidate) -> str:
        """The model name candidate is served as: Triton's default as the second copy when there is
        one."""
        return self.twin if candidate.is_default and self.twin else self.model

    def ensure(self, candidate: Candidate) -> str | None:
        """Candidate loaded (a load with a config override); the reason when Triton refuses it."""
        if candidate in self.load_errors:
            return self.load_errors[candidate]
        name = self.slot(candidate)
        if self.loaded.get(name) != candidate:
            config = apply(self.base_mc, candidate)
            config.name = name
            try:
                load_with_config(self.url, name, config)
                self.loaded[name], self.fresh = candidate, True
            except ModelLoadError as e:
                self.loaded[name] = None
                self.load_errors[candidate] = f"Triton refused the config: {e.message}"
                return self.load_errors[candidate]
        if self.checker is not None:
            self.checker.name = name
        if self.invariant and candidate not in self.own:
            self._record_own(candidate)
        return None

    def _record_own(self, candidate: Candidate) -> None:
        """invariant: the config's own answers (each input alone, on its first load) are what its
        answers under load are compared with; how many golden outputs they differ from is kept."""
        self.own[candidate] = self.checker.answers_alone()
        self.new_bits[candidate.label] = sum(
            1
            for mine, golden in zip(self.own[candidate], self.reference, strict=True)
            for name, expected in golden.items()
            if mine[name].tobytes() != expected.tobytes()
        )

    def confirm(self, candidate: Candidate) -> list[Decision]:
        """Candidate and Triton's default in paired rounds at every load, interleaved A B, B A, ...;
        each load's throughput ratio decided on its bootstrap interval against min_vs_default.
        While a load's interval holds the threshold (inside noise), two more rounds at a time, up
        to the spec's round cap: a noisy machine measures longer instead of deciding in noise."""
        spec, cap = self.spec, self.spec.round_cap
        readings = {load: {"candidate": [], "default": []} for load in self.loads}
        self.say(
            f"confirming {candidate.label}: {spec.rounds} paired rounds with the default at "
            f"{self.loads}" + (f" (up to {cap} while inside noise)" if cap > spec.rounds else "")
        )
        order = abba_order(cap)
        decisions = self._paired_rounds(candidate, readings, order[: spec.rounds])
        done = spec.rounds
        while done < cap and any(d.outcome == "inside noise" for d in decisions):
            more = order[done : done + 2]
            noisy = [d.load for d in decisions if d.outcome == "inside noise"]
            self.say(
                f"inside noise at {', '.join(noisy)}: {len(more)} more paired round(s) "
                f"({done + len(more)} of at most {cap})"
            )
            decisions = self._paired_rounds(candidate, readings, more)
            done += len(more)
        self.paired[candidate.label] = readings
        return decisions

    def _paired_rounds(self, candidate, readings, rounds) -> list[Decision]:
        """The given rounds measured (both configs at every load, in each round's order), then
        every load decided on all of its rounds so far."""
        default, spec = self.grid.default, self.spec
        # the estimate counted the search's measurements only: these rounds come on top of what is
        # left of it
        self.guess = max(self.guess, self.done) + 2 * len(rounds) * len(self.loads)
        for _round, candidate_first in rounds:
            for who in (candidate, default) if candidate_first else (default, candidate):
                for load in self.loads:
                    point = self.measure(who, load, phase="paired")
                    readings[load]["candidate" if who == candidate else "default"].append(
                        round(point.throughput, 2)
                    )
        return [
            Decision(
                "throughput",
                load,
                spec.min_vs_default,
                ratio_interval(pair["candidate"], pair["default"], spec.confidence),
            )
            for load, pair in readings.items()
        ]

    def measure(self, candidate: Candidate, load: str, phase: str = "screening") -> search.Point:
        err = self.ensure(candidate)
        if err:
            return search.Point(load, 0.0, float("inf"), errors=1, extra={"load_error": err})
        # NOTE: the first second after a (re)load is slow (seen on the H200: first windows at 20-50
        # %), so a fresh load gets a longer warm-up than the next loads of the same candidate: two
        # windows, at least 0.5 s (1 s with the H200 benchmark's 0.5 s windows).
        warmup_s = max(0.5, 2 * self.spec.window_s) if self.fresh else None
        self.fresh = False
        if self.invariant:
            self.generator.expect(self.own[candidate])
        result = measure_load(
            self.generator, load, self.spec, warmup_s=warmup_s, model=self.slot(candidate)
        )
        self.done += 1
        tally = self.answers.setdefault(candidate.label, {"compared": 0, "differing": 0})
        if self.reference is not None:
            tally["compared"] += result.requests
            tally["differing"] += result.mismatches
        elapsed = time.monotonic() - self.t0
        left = max(0, self.guess - self.done) * elapsed / self.done
        self.say(
            f"[{self.done}/~{self.guess}] {candidate.label} @ {load}: {result.throughput:.0f} "
            f"req/s, p99 {result.p99_ms:.1f} ms{'' if result.stable else ' (unstable)'}; "
            f"~{left:.0f}s left"
        )
        append_measurement(self.report_dir, candidate, phase, elapsed, result)
        return search.Point(
            load,
            result.throughput,
            result.p99_ms,
            result.errors,
            result.mismatches,
            extra=result.to_dict(),
        )

    def verify(self, candidate: Candidate) -> str | None:
        """None when candidate gives the goldens' bits (alone, and batched as the recipe requires);
        else why."""
        if self.checker is None:
            return None
        err = self.ensure(candidate)
        if err:
            return err
        self.say(
            f"verifying {candidate.label} with "
            + ("its own answers alone" if self.invariant else "the goldens")
        )
        alone, batched = self.checker.check(candidate, self.own.get(candidate))
        results = self.ev.results
        under = [
            (
                load,
                results[(candidate, load)].extra.get("first_mismatch"),
                results[(candidate, load)].mismatches,
            )
            for load in self.loads
            if (candidate, load) in results and results[(candidate, load)].mismatches
        ]
        self.verifications[candidate.label] = {
            "repeats_alone": self.manifest_model.verify.repeats,
            "mismatches_alone": [x.model_dump() for x in alone],
            "mismatches_batched": [x.model_dump() for x in batched],
            "mismatches_under_load": [{"load": lo, "answers": n, "first": f} for lo, f, n in under],
        }
        if alone:
            return (
                "answers differ from "
                f"{'its own first answers' if self.invariant else 'the goldens'} when sent "
                f"alone ({len(alone)} outputs)"
            )
        tally = self.answers.get(candidate.label, {"compared": 0, "differing": 0})
        if self.exact_under_load and (batched or tally["differing"]):
            worst = max(
                [x.max_abs_diff or 0.0 for x in batched]
                + [(f or {}).get("max_abs_diff") or 0.0 for _, f, _n in under]
                + [0.0]
            )
            return (
                f"outputs change with batch composition ({self._bit_rule}): {len(batched)} "
                f"batched outputs and {tally['differing']} of {tally['compared']} answers under "
                f"load differ, max |diff| {worst:.3g}"
            )
        return None

    @property
    def _bit_rule(self) -> str:
        return "tune.determinism: invariant" if self.invariant else "batch_invariance: require"


def measure_load(
    lg: LoadGenerator,
    load: str,
    spec: Tune,
    warmup_s: float | None = None,
    model: str | None = None,
) -> Result:
    """One measurement at a load: "cN" N concurrent clients, "rX" X requests per second."""
    kw = {
        "window_s": spec.window_s,
        "stable_windows": spec.stable_windows,
        "stability": spec.stability,
        "max_windows": spec.max_windows,
        "warmup_s": warmup_s,
        "model": model,
    }
    if load.startswith("c"):
        return lg.measure(concurrency=int(load[1:]), **kw)
    return lg.measure(rate=float(load[1:]), **kw)
