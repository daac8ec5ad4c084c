"""Decisions with stated confidence: a candidate and Triton's default measured in pairs,
interleaved, and the ratio of their throughputs given as a bootstrap interval; a rule ("at least
min_vs_default × the default") is decided on the interval, never on one reading.

Pairs: round k measures the default and the candidate back to back at one load, in the order A B,
then B A in the next round (ABBA), so a drift of the machine over the run (thermal, another tenant,
a server warming up) falls on both alike. The statistic is the ratio of the mean throughputs; its
interval is the percentile bootstrap over the rounds (pairs resampled together), with a fixed seed
so the same readings give the same interval. With few rounds the interval is no wider than the
spread of the per-round ratios: the report gives the rounds beside it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

RESAMPLES = 4000
SEED = 0


@dataclass(frozen=True)
class Interval:
    ratio: float  # mean candidate throughput / mean default throughput over the rounds
    low: float
    high: float
    confidence: float
    rounds: int

    def to_dict(self) -> dict:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}

    def __str__(self) -> str:
        return (
            f"{self.ratio:.3f}× [{self.low:.3f}–{self.high:.3f}] ({self.confidence:.0%}, "
            f"{self.rounds} rounds)"
        )


@dataclass(frozen=True)
class Decision:
    """One rule at one load, decided on the interval: passed (low >= threshold), failed (high <
    threshold) or inside noise (the interval holds the threshold: the rule is not met with the
    stated confidence)."""

    rule: str
    load: str
    threshold: float
    interval: Interval

    @property
    def outcome(self) -> str:
        if self.interval.low >= self.threshold:
            return "passed"
        if self.interval.high < self.threshold:
            return "failed"
        return "inside noise"

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    def describe(self) -> str:
        said = {
            "passed": "met",
            "failed": "missed",
            "inside noise": "not met with this confidence, decided inside noise",
        }[self.outcome]
        return (
            f"{self.rule} >= {self.threshold:g}× the default at {self.load}: {said}; paired ratio "
            f"{self.interval}"
        )

    def to_dict(self) -> dict:
        return {
            "rule": self.rule,
            "load": self.load,
            "threshold": self.threshold,
            "outcome": self.outcome,
            "interval": self.interval.to_dict(),
            "text": self.describe(),
        }


def ratio_interval(
    candidate: list[float], default: list[float], confidence: float, seed: int = SEED
) -> Interval:
    """The ratio of mean throughputs (candidate / default) over paired rounds, with its percentile
    bootstrap interval at `confidence` (two-sided)."""
    cand, base = np.asarray(candidate, dtype=float), np.asarray(default, dtype=float)
    if cand.shape != base.shape or cand.size == 0:
        raise ValueError(
            f"paired rounds must match: {cand.size} candidate vs {base.size} default readings"
        )
    ratio = _ratio(cand.mean(), base.mean())
    if cand.size == 1:
        return Interval(ratio, ratio, ratio, confidence, 1)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, cand.size, size=(RESAMPLES, cand.size))
    means_c, means_b = cand[picks].mean(axis=1), base[picks].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(means_b > 0, means_c / np.where(means_b > 0, means_b, 1.0), 0.0)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return Interval(ratio, float(low), float(high), confidence, int(cand.size))


def _ratio(a: float, b: float) -> float:
    return float(a / b) if b > 0 else 0.0


def abba_order(rounds: int) -> list[tuple[int, bool]]:
    """(round, candidate first?) for each round: A B, B A, A B, ... (the candidate is B)."""
    return [(k, k % 2 == 1) for k in range(rounds)]


def overlap(first: Interval, second: Interval) -> bool:
    return first.low <= second.high and second.low <= first.high
