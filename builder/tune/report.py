"""The tune report: every measurement, default vs tuned per load, the machine, server and client versions."""

from __future__ import annotations

import os
import platform
from contextlib import suppress
from importlib import metadata

import numpy as np

from tritonbuild.core.toolchain import fingerprint
from tritonbuild.triton.client import server_version
from tritonbuild.tune import search
from tritonbuild.tune.confidence import overlap
from tritonbuild.tune.space import Candidate


def server_version_of(url: str) -> str:
    return server_version(url) or "?"


def client_versions() -> dict:
    out = {}
    for pkg in ("tritonclient", "grpcio", "numpy", "protobuf", "nvidia-pytriton", "torch"):
        with suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out


def candidate_dict(candidate: Candidate, base_instances) -> dict:
    return {
        "label": candidate.label,
        **candidate.model_dump(exclude={"coords"}),
        "recipe_values": candidate.recipe_values(base_instances),
    }


CLIENT_BOUND = (
    0.90  # a measurement within 10 % of the empty model's throughput is limited by the client
)


def build_report(
    manifest_model,
    spec,
    grid,
    loads,
    ev,
    default,
    winner,
    ceiling,
    verifications,
    load_errors,
    notes,
    *,
    brute,
    processes,
    server_version,
    elapsed,
    no_verify,
    base_instances,
    answers=None,
    paired=None,
    ceiling_scaling=None,
    new_bits=None,
) -> dict:
    answers, paired = answers or {}, paired or {}
    top = loads[-1]
    grid_size = len({default, *grid.all()}) * len(loads)
    measurements = _measurements(ev, ceiling)
    cands = sorted(
        {candidate for candidate, _ in ev.order},
        key=lambda candidate: (not candidate.is_default, candidate.label),
    )
    rejections = rejections_of(ev, cands, winner, load_errors)
    per_cand = [
        _candidate_entry(ev, candidate, loads, base_instances, load_errors, answers, paired)
        for candidate in cands
    ]
    comparison = _comparison(ev, loads, default, winner)
    default_is_best = winner is not None and winner == default
    return {
        "schema_version": 2,
        "model": manifest_model.name,
        "version": manifest_model.version,
        "backend": manifest_model.backend,
        "target": manifest_model.target,
        "search": "brute" if brute else "quick",
        "measurements_made": ev.count,
        "paired_measurements": sum(
            2 * len(r["candidate"]) for rounds in paired.values() for r in rounds.values()
        ),
        "grid_measurements": grid_size,
        "measurement_share": round(ev.count / grid_size, 4),
        "loads": loads,
        "top_load": top,
        "sla_p99_ms": spec.sla_p99_ms,
        "min_vs_default": spec.min_vs_default,
        "rounds": spec.rounds,
        "confidence": spec.confidence,
        "batch_invariance": manifest_model.verify.batch_invariance,
        "verified_with_goldens": not no_verify,
        "tune": spec.model_dump(mode="json"),
        "ceiling": {
            "model": "empty python model",
            **ceiling.to_dict(),
            "client_bound_at": CLIENT_BOUND,
            "scaling": ceiling_scaling or [],
        },
        "default": candidate_dict(default, base_instances),
        "winner": None if winner is None else candidate_dict(winner, base_instances),
        "default_is_best": default_is_best,
        "determinism": spec.determinism,
        "served_bits": served_bits(manifest_model, winner, new_bits),
        "verdict": _verdict(ev, winner, default, comparison),
        "pick": _pick(ev, winner),
        "comparison": comparison,
        "high_load_ratio": comparison.get(top, {}).get("ratio"),
        "low_load_ratio": comparison.get(loads[0], {}).get("ratio"),
        "closest": None if winner is not None else closest_of(ev, spec, loads, cands),
        "rejections": rejections,
        "new_bits": new_bits,
        "rejected_not_bit_exact": [r for r in rejections if r["cause"] == "not_bit_exact"],
        "answers": answers,
        "verifications": verifications,
        "candidates": per_cand,
        "measurements": measurements,
        "notes": list(notes) + _notes(spec, measurements, ceiling),
        "machine": _machine(processes),
        "server": {"tritonserver": server_version},
        "client": client_versions(),
        "elapsed_s": round(elapsed, 1),
    }


def served_bits(manifest_model, winner, new_bits) -> dict | None:
    """tune.determinism: invariant: whether the winner serves other bits than the goldens (then the patch gives
    the model a new version and the goldens are recorded again); None under goldens."""
    if new_bits is None or winner is None:
        return None
    differing = new_bits.get(winner.label, 0)
    if not differing:
        return {"changed": False, "text": "the winner serves the goldens' bits"}
    # the plain model (tune.baseline: plain, no buckets, no batcher): invariant only as measured, for the requests
    # tune sent (one row each); a request of k rows computes at k rows
    how = (
        "its answers matched its own answers alone under tune's one-row requests, but without buckets a request "
        "of several rows computes at its own row count"
        if winner.is_default and winner.buckets == ()
        else "its answers do not depend on batch composition or load"
    )
    return {
        "changed": True,
        "golden_outputs_differing": differing,
        "version": manifest_model.version + 1,
        "text": f"the winner serves other bits than the goldens ({differing} golden outputs differ; {how}): "
        "a new model version "
        f"{manifest_model.version + 1}; after the rebuild record its goldens (tritonbuild verify OUT "
        "--record --force) and commit them",
    }


def _machine(processes: int) -> dict:
    tc = fingerprint()
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "gpu": tc.get("gpu_name"),
        "gpu_driver": tc.get("driver_version") or tc.get("nvidia_driver"),
        "load_processes": processes,
    }


def _measurements(ev, ceiling) -> list[dict]:
    rows = [(candidate.label, ev.results[(candidate, load)]) for candidate, load in ev.order]
    rows += [("default (again, after the search)", point) for point in ev.default_again.values()]
    out = []
    for label, point in rows:
        out.append(
            {
                "candidate": label,
                "load": point.load,
                **{k: v for k, v in point.extra.items() if k != "load"},
                "throughput": round(point.throughput, 3),
                "p99_ms": point.p99_ms,
                "errors": point.errors,
                "mismatches": point.mismatches,
                "client_bound": point.load == ev.top
                and bool(ceiling.throughput)
                and point.throughput >= CLIENT_BOUND * ceiling.throughput,
            }
        )
    return out


def _candidate_entry(ev, candidate, loads, base_instances, load_errors, answers, paired) -> dict:
    verdict = ev.verdict(candidate) if all((candidate, lo) in ev.results for lo in loads) else None
    return {
        **candidate_dict(candidate, base_instances),
        "loads": {
            lo: point_dict(ev.results[(candidate, lo)])
            for lo in loads
            if (candidate, lo) in ev.results
        },
        "feasible": None if verdict is None else verdict.feasible and candidate not in ev.rejected,
        "reasons": [] if verdict is None else verdict.reasons,
        "decisions": [decision.to_dict() for decision in ev.decisions.get(candidate, [])],
        "paired_rounds": paired.get(candidate.label),
        "answers": answers.get(candidate.label, {"compared": 0, "differing": 0}),
        "load_error": load_errors.get(candidate),
    }


RULES = {
    "load_refused": "Triton must load the config",
    "failed_requests": "no failed requests at any load",
    "sla": "p99 within the SLA at every load",
    "not_bit_exact": "the goldens' bits, alone and under load (verify.batch_invariance: require)",
    "slower_than_default": "at least min_vs_default × Triton's default at every load",
    "outranked": "the highest throughput at the top load among the configs that pass every rule",
    "not_confirmed": "a finalist is chosen only after paired rounds against the default (at most 4 finalists)",
    "not_measured": "a config is chosen only when measured at every load",
}


def _screening_cause(reason: str) -> str:
    if "failed requests" in reason:
        return "failed_requests"
    if "SLA" in reason:
        return "sla"
    if "differ from the goldens" in reason:
        return "not_bit_exact"
    return "slower_than_default"


def _rejection(ev, candidate, winner, load_errors) -> dict | None:
    """Why candidate was not chosen: the rule that decided it, how (a screening reading, the paired interval,
    the goldens), and the evidence."""
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
        paired = ev.rules.get(candidate) == "paired"
        cause = (
            "slower_than_default"
            if paired
            else (
                "not_bit_exact"
                if "differ" in ev.rejected[candidate]
                or "batch composition" in ev.rejected[candidate]
                else "goldens"
            )
        )
        failed = (
            [d.to_dict() for d in ev.decisions.get(candidate, []) if not d.passed] if paired else []
        )
        return {
            **entry,
            "cause": cause,
            "rule": RULES.get(cause, "the goldens check"),
            "decided_by": "paired interval" if paired else "goldens check",
            "detail": ev.rejected[candidate],
            "decisions": failed,
        }
    reasons = [
        reason
        for load in ev.loads
        if (candidate, load) in ev.results
        for reason in ev.problems(candidate, load)
    ]
    if reasons:
        cause = _screening_cause(reasons[0])
        return {
            **entry,
            "cause": cause,
            "rule": RULES[cause],
            "decided_by": "screening reading",
            "detail": "; ".join(reasons),
        }
    if candidate.is_default:
        return None
    measured = [load for load in ev.loads if (candidate, load) in ev.results]
    if candidate in ev.skipped and len(measured) < len(
        ev.loads
    ):  # not outranked: never measured at every load
        return {
            **entry,
            "cause": "not_measured",
            "rule": RULES["not_measured"],
            "decided_by": "quick search",
            "detail": f"{ev.get(candidate, ev.top).throughput:.0f} req/s at {ev.top}, not measured at "
            f"{', '.join(lo for lo in ev.loads if lo not in measured)}: {ev.skipped[candidate]}",
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
        detail += "; the runner-up (" + _pick(ev, winner)["text"] + ")"
    return {
        **entry,
        "cause": "outranked",
        "rule": RULES["outranked"],
        "decided_by": how,
        "detail": detail,
    }


def rejections_of(ev, cands, winner, load_errors) -> list[dict]:
    """Every measured candidate that was not chosen, with the cause."""
    out = [
        _rejection(ev, candidate, winner, load_errors) for candidate in cands if candidate != winner
    ]
    return [entry for entry in out if entry is not None]


def _pick(ev, winner) -> dict:
    """The winner against the runner-up on their paired top-load ratios: decided, or inside noise."""
    top = lambda c: next((d.interval for d in ev.decisions.get(c, []) if d.load == ev.top), None)  # noqa: E731
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


def _verdict(ev, winner, default, comparison) -> str:
    if winner is None:
        return "no config meets the rules at every load"
    if winner == default:
        return (
            "the default is best: no batching or instance config met every rule at every load "
            "(each candidate's cause is under rejections)"
        )
    parts = [
        f"{load}: {row['ratio']}×"
        + (f" [{row['low']}–{row['high']}]" if row.get("low") is not None else "")
        for load, row in comparison.items()
    ]
    return f"{winner.label} over Triton's default: " + ", ".join(parts)


def _comparison(ev, loads, default, winner) -> dict:
    """Tuned vs default per load: the paired rounds' means and interval when confirmed, else the screening
    readings (the default's better one). Empty when the default itself won (no ratio of a config to itself)."""
    if winner is None or winner == default:
        return {}
    out = {}
    decisions = {d.load: d for d in ev.decisions.get(winner, [])}
    for lo in loads:
        default_point, winner_point = ev.results[(default, lo)], ev.results[(winner, lo)]
        again = ev.default_again.get(lo)
        if again is not None and again.throughput > default_point.throughput:
            default_point = again  # the baseline is the better of the default's two measurements
        row = {
            "default": point_dict(default_point),
            "tuned": point_dict(winner_point),
            "default_measurements": [point_dict(ev.results[(default, lo)])]
            + ([point_dict(again)] if again else []),
            "ratio": round(winner_point.throughput / default_point.throughput, 4)
            if default_point.throughput
            else None,
        }
        if lo in decisions:
            interval = decisions[lo].interval
            row.update(
                ratio=round(interval.ratio, 4),
                low=round(interval.low, 4),
                high=round(interval.high, 4),
                decided_by="paired interval",
                outcome=decisions[lo].outcome,
            )
        out[lo] = row
    return out


def _notes(spec, measurements, ceiling) -> list[str]:
    out = []
    client_bound = [x for x in measurements if x["client_bound"]]
    if client_bound:
        out.append(
            f"client-bound: {len(client_bound)} measurement(s) within {1 - CLIENT_BOUND:.0%} of the load "
            f"generator's ceiling ({ceiling.throughput:.0f} req/s) at "
            "the top load, flagged client_bound: their figure is the client's limit, not the server's; more "
            "client processes or machines are needed to see the server's"
        )
    short = [
        f"{x['candidate']} @ {x['load']}: {x['throughput']:.0f} of {x['offered_rate']:g} req/s"
        for x in measurements
        if x.get("offered_rate") and x["throughput"] < 0.9 * x["offered_rate"]
    ]
    if short:
        out.append(
            f"open loop: {len(short)} measurement(s) served < 90 % of the offered rate (the server or, "
            f"near {ceiling.throughput:.0f} req/s, the client is saturated): "
            + "; ".join(short[:5])
        )
    unstable = sum(1 for x in measurements if not x.get("stable", True))
    if unstable:
        out.append(f"{unstable} measurement(s) did not stabilise within {spec.max_windows} windows")
    if spec.rounds < 2:
        out.append("rounds: 1: the rules were decided on single readings (no interval)")
    return out


def closest_of(ev, spec, loads, cands) -> dict | None:
    """The candidate that misses by the least: its worst relative shortfall over the SLA and the default."""

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


def finite(x):
    """JSON has no Infinity: a latency never measured (load refused) is null."""
    if isinstance(x, float):
        return x if np.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    return x


def point_dict(point: search.Point) -> dict:
    e = point.extra
    return {
        "throughput": round(point.throughput, 2),
        "p50_ms": e.get("p50_ms"),
        "p95_ms": e.get("p95_ms"),
        "p99_ms": point.p99_ms if np.isfinite(point.p99_ms) else None,
        "errors": point.errors,
        "mismatches": point.mismatches,
        "stable": e.get("stable"),
    }
