"""The tests' own time limits (tests/timing.py): derived from a measured baseline and this machine's speed."""

from __future__ import annotations

from tests import timing


def test_a_limit_is_the_baseline_times_the_margin_times_this_machines_slowness(monkeypatch):
    timing.slowness.cache_clear()
    monkeypatch.setenv("TRITONBUILD_TEST_SLOWNESS", "2.5")
    try:
        assert timing.limit(72) == 72 * timing.MARGIN * 2.5
        monkeypatch.setenv(
            "TRITONBUILD_TEST_SLOWNESS", "0.5"
        )  # a faster machine never shortens the margin
        timing.slowness.cache_clear()
        assert timing.limit(72) == 72 * timing.MARGIN
    finally:
        timing.slowness.cache_clear()


def test_the_calibration_measures_this_machine(monkeypatch):
    monkeypatch.delenv("TRITONBUILD_TEST_SLOWNESS", raising=False)
    timing.slowness.cache_clear()
    try:
        factor = timing.slowness()
        assert 1.0 <= factor < 50
        slow = iter(
            [0.0, 0.1] * 7
        )  # every calibration round takes 0.1 s here: five times the reference's
        monkeypatch.setattr(timing.time, "perf_counter", lambda: next(slow))
        timing.slowness.cache_clear()
        assert timing.slowness() == 0.1 / timing.REFERENCE_S
    finally:
        timing.slowness.cache_clear()
