"""Why a tune candidate was not chosen (tune/rejections.py)."""

from __future__ import annotations

from tritonbuild.tune.rejections import _screening_cause


def test_a_candidate_whose_answers_differ_is_rejected_for_them_whatever_load_was_read_first():
    """Seen in a loaded CI run: the first load's reading was only slower, the next one's answers differed, and the
    report said slower_than_default for a config that changes answers."""
    reasons = [
        "310 req/s < 0.95 × default 402 at c1",
        "3 answers differ from the goldens at c4",
        "p99 9.10 ms > SLA 5 ms at c4",
    ]
    assert _screening_cause(reasons) == "not_bit_exact"
    assert _screening_cause(["2 failed requests at c4", *reasons]) == "failed_requests"
    assert _screening_cause([reasons[0], reasons[2]]) == "sla"
    assert _screening_cause([reasons[0]]) == "slower_than_default"
