"""Why each measured candidate of a tune run was not chosen (the rule, what decided it, the
evidence), the pick between the two best finalists, and the closest miss when nothing won."""

from __future__ import annotations

from tritonbuild.tune.confidence import overlap

RULES = {
    "load_refused": "Triton must load the config",
    "failed_requests": "no failed requests at any load",
    "sla": "p99 within the SLA at every load",
    "not_bit_exact": "the goldens' bits, alone and under load (verify.batch_invariance: require)",
    "slower_than_default": "at least min_vs_default × Triton's default at every load",
    "outranked": "the highest throughput at the top load among the configs that pass every rule",
    "not_confirmed": "a finalist is chosen only after paired rounds against the default (at most 4 "
    "finalists)",
    "not_measured": "a config is chosen only when measured at every load",
}


# A screening reading's causes, most severe first: a candidate whose answers differ at one load and which is
# only slower at another is rejected for its answers (the first reason read decided it before: under a loaded
# machine the report said slower_than_default for a config that changes answers).
SEVERITY = ("failed_requests", "not_bit_exact", "sla", "slower_than_default")


def _reason_cause(reason: str) -> str:
    if "failed requests" in reason:
        return "failed_requests"
    if "SLA" in reason:
        return "sla"
    if "differ from the goldens" in reason:
        return "not_bit_exact"
    return "slower_than_default"


def _screening_cause(reasons: list[str]) -> str:
    causes = {_reason_cause(reason) for reason in reasons}
    return next(cause for cause in SEVERITY if cause in causes)


def _rejection(ev, candidate, winner, load_errors) -> dict | None:
    """Why candidate was not chosen: the rule that decided it, how (a screening reading, the paired
    interval, the goldens), and the evidence."""
    entry = {"label": candidate.label}
    if candidate in load_errors:
        return {
            **entry,
            "cause": "load_refused",
            "rule": RULES["load_refused"],
            "decided_by": "Triton",
            "detail": load_errors[candidate],
        }
    if ev.rules.get(candidate) == "unconfirmed":
        return {
            **entry,
            "cause": "not_confirmed",
            "rule": RULES["not_confirmed"],
            "decided_by": "budget",
            "detail": ev.rejected[candidate],
        }
    if candidate in ev.rejected:
        return {**entry, **_rejected_by_rule(ev, candidate)}
    reasons = [
        reason
        for load in ev.loads
        if (candidate, load) in ev.results
        for reason in ev.problems(candidate, load)
    ]
    if reasons:
        cause = _screening_cause(reasons)
        return {
            **entry,
            "cause": cause,
            "rule": RULES[cause],
            "decided_by": "screening reading",
            "detail": "; ".join(reasons),
        }
    if candidate.is_default:
        return None
    return {**entry, **_not_chosen(ev, candidate, winner)}


def _rejected_by_rule(ev, candidate) -> dict:
    """A finalist rejected on paired rounds (slower than the default) or by the goldens check."""
    paired = ev.rules.get(candidate) == "paired"
    why = ev.rejected[candidate]
    if paired:
        cause = "slower_than_default"
    else:
        cause = "not_bit_exact" if "differ" in why or "batch composition" in why else "goldens"
    failed = (
        [d.to_dict() for d in ev.decisions.get(candidate, []) if not d.passed] if paired else []
    )
    return {
        "cause": cause,
        "rule": RULES.get(cause, "the goldens check"),
        "decided_by": "paired interval" if paired else "goldens check",
        "detail": why,
        "decisions": failed,
    }


def _not_chosen(ev, candidate, winner) -> dict:
    """A candidate that broke no rule: never measured at every load (quick search's budget), or
    outranked by the winner."""
    measured = [load for load in ev.loads if (candidate, load) in ev.results]
    if candidate in ev.skipped and len(measured) < len(ev.loads):
        # not outranked: never measured at every load
        return {
            "cause": "not_measured",
            "rule": RULES["not_measured"],
            "decided_by": "quick search",
            "detail": f"{ev.get(candidate, ev.top).throughput:.0f} req/s at {ev.top}, not measured "
            f"at {', '.join(lo for lo in ev.loads if lo not in measured)}: "
            f"{ev.skipped[candidate]}",
        }
    how = (
        "paired interval"
        if candidate in ev.decisions
        else (
            "screening reading"
            if len(measured) == len(ev.loads)
            else f"screening reading at {', '.join(measured)} only"
        )
    )
    detail = f"{ev.get(candidate, ev.top).throughput:.0f} req/s at {ev.top}" + (
        f" vs the winner's {ev.get(winner, ev.top).throughput:.0f}" if winner is not None else ""
    )
    if candidate == ev.runner_up:
        detail += "; the runner-up (" + pick(ev, winner)["text"] + ")"
    return {"cause": "outranked", "rule": RULES["outranked"], "decided_by": how, "detail": detail}


def rejections_of(ev, cands, winner, load_errors) -> list[dict]:
    """Every measured candidate that was not chosen, with the cause."""
    out = [
        _rejection(ev, candidate, winner, load_errors) for candidate in cands if candidate != winner
    ]
    return [entry for entry in out if entry is not None]


def pick(ev, winner) -> dict:
    """The winner against the runner-up on their paired top-load ratios: decided, or inside
    noise."""

    def top(candidate):
        decisions = ev.decisions.get(candidate, [])
        return next((d.interval for d in decisions if d.load == ev.top), None)

    if winner is None or ev.runner_up is None or top(winner) is None or top(ev.runner_up) is None:
        return {
            "winner": None if winner is None else winner.label,
            "runner_up": None,
            "overlap": None,
            "text": "no second finalist was confirmed",
        }
    first, second = top(winner), top(ev.runner_up)
    apart = not overlap(first, second)
    return {
        "winner": winner.label,
        "runner_up": ev.runner_up.label,
        "overlap": not apart,
        "winner_interval": first.to_dict(),
        "runner_up_interval": second.to_dict(),
        "text": (
            f"{winner.label} {first} vs {ev.runner_up.label} {second} at {ev.top}: "
            + (
                "decided, the intervals do not overlap"
                if apart
                else "the intervals overlap: either pick is within noise"
            )
        ),
    }


def closest_of(ev, spec, loads, cands) -> dict | None:
    """The candidate that misses by the least: its worst relative shortfall over the SLA and the
    default."""

    def shortfall(candidate) -> float:
        worst = 0.0
        for lo in loads:
            point = ev.results[(candidate, lo)]
            if (
                point.errors
                or (point.mismatches and ev.exact_under_load)
                or candidate in ev.rejected
            ):
                return float("inf")
            if spec.sla_p99_ms:
                worst = max(worst, point.p99_ms / spec.sla_p99_ms - 1)
            if not candidate.is_default and point.throughput > 0:
                worst = max(worst, spec.min_vs_default * ev.baseline(lo) / point.throughput - 1)
        return worst

    full = [candidate for candidate in cands if all((candidate, lo) in ev.results for lo in loads)]
    if not full:
        return None
    candidate = min(full, key=shortfall)
    worst = max(ev.results[(candidate, lo)].p99_ms for lo in loads)
    return {
        "label": candidate.label,
        "reasons": ev.verdict(candidate).reasons,
        "worst_p99_ms": worst,
        "shortfall": round(shortfall(candidate), 4),
        "sla_miss_ms": round(worst - spec.sla_p99_ms, 3) if spec.sla_p99_ms else None,
    }
