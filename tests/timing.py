"""Time limits for the tests' long subprocesses, derived from a measured baseline instead of fixed seconds (issue 44
item 7): `limit(measured)` is the seconds the whole step took in a measured run, times MARGIN, times how much slower
this machine runs plain Python now than the machine that measured it (a short calibration, best of seven, once per
test process; TRITONBUILD_TEST_SLOWNESS sets the factor instead). A loaded or slower runner gets longer limits; a
hung step still ends the test in bounded time.

Baselines are measured with the test timeline (TRITONBUILD_TEST_TIMELINE=FILE, ci/timeline.py) and written beside
each call with the run they come from."""

from __future__ import annotations

import functools
import os
import time

MARGIN = 6
# The calibration's best time on the machine the baselines were measured on (AMD EPYC Zen 4, 2 cores, 2026-12-06:
# 0.0197-0.0217 s in three processes, load 1.7).
REFERENCE_S = 0.020


def _calibration() -> float:
    total = 0
    for i in range(400_000):
        total += i * i % 7
    return total


@functools.cache
def slowness() -> float:
    """How many times slower than the reference machine this one runs the calibration now, at least 1."""
    if given := os.environ.get("TRITONBUILD_TEST_SLOWNESS"):
        return max(1.0, float(given))
    best = float("inf")
    for _ in range(7):
        start = time.perf_counter()
        _calibration()
        best = min(best, time.perf_counter() - start)
    return max(1.0, best / REFERENCE_S)


def limit(measured_s: float) -> float:
    """The time limit for a step measured at `measured_s` seconds."""
    return measured_s * MARGIN * slowness()
