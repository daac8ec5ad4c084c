"""The tune report: every measurement, default vs tuned per load, the machine, server and client
versions."""

from __future__ import annotations

import os
import platform
from contextlib import suppress
from importlib import metadata

import numpy as np

from tritonbuild.core.toolchain import fingerprint
from tritonbuild.triton.client import server_version
from tritonbuild.tune import search
from tritonbuild.tune.rejections import closest_of, pick, rejections_of
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
    return {
        **_run_facts(manifest_model, spec, ev, loads, grid_size, brute, paired, no_verify),
        "ceiling": {
            "model": "empty python model",
            **ceiling.to_dict(),
            "client_bound_at": CLIENT_BOUND,
            "scaling": ceiling_scaling or [],
        },
        **_outcome(
            ev, manifest_model, spec, loads, cands, default, winner, new_bits, base_instances
        ),
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


def _outcome(ev, manifest_model, spec, loads, cands, default, winner, new_bits, base) -> dict:
    """The default and the winner, how they compare per load, the pick between the finalists, the
    closest miss when nothing won."""
    comparison = _comparison(ev, loads, default, winner)
    return {
        "default": candidate_dict(default, base),
        "winner": None if winner is None else candidate_dict(winner, base),
        "default_is_best": winner is not None and winner == default,
        "determinism": spec.determinism,
        "served_bits": served_bits(manifest_model, winner, new_bits),
        "verdict": _verdict(ev, winner, default, comparison),
        "pick": pick(ev, winner),
        "comparison": comparison,
        "high_load_ratio": comparison.get(loads[-1], {}).get("ratio"),
        "low_load_ratio": comparison.get(loads[0], {}).get("ratio"),
        "closest": None if winner is not None else closest_of(ev, spec, loads, cands),
    }


def _run_facts(manifest_model, spec, ev, loads, grid_size, brute, paired, no_verify) -> dict:
    """The model, the search and its measurement count, the load range and the rules."""
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
        "top_load": loads[-1],
        "sla_p99_ms": spec.sla_p99_ms,
        "min_vs_default": spec.min_vs_default,
        "rounds": spec.rounds,
        "round_cap": spec.round_cap,
        "confidence": spec.confidence,
        "batch_invariance": manifest_model.verify.batch_invariance,
        "verified_with_goldens": not no_verify,
        "tune": spec.model_dump(mode="json"),
    }


def served_bits(manifest_model, winner, new_bits) -> dict | None:
    """tune.determinism: invariant: whether the winner serves other bits than the goldens (then the
    patch gives the model a new version and the goldens are recorded again); None under goldens."""
    if new_bits is None or winner is None:
        return None
    differing = new_bits.get(winner.label, 0)
    if not differing:
        return {"changed": False, "text": "the winner serves the goldens' bits"}
    # the plain model (tune.baseline: plain, no buckets, no batcher): invariant only as measured,
    # for the requests tune sent (one row each); a request of k rows computes at k rows
    how = (
        "its answers matched its own answers alone under tune's one-row requests, but without "
        "buckets a request of several rows computes at its own row count"
        if winner.is_default and winner.buckets == ()
        else "its answers do not depend on batch composition or load"
    )
    return {
        "changed": True,
        "golden_outputs_differing": differing,
        "version": manifest_model.version + 1,
        "text": f"the winner serves other bits than the goldens ({differing} golden outputs "
        f"differ; {how}): a new model version "
        f"{manifest_model.version + 1}; after the rebuild record its goldens (tritonbuild verify "
        "OUT --record --force) and commit them",
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
    """Tuned vs default per load: the paired rounds' means and interval when confirmed, else the
    screening readings (the default's better one). Empty when the default itself won (no ratio of a
    config to itself)."""
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
                rounds=interval.rounds,
            )
        out[lo] = row
    return out


def _notes(spec, measurements, ceiling) -> list[str]:
    out = []
    client_bound = [x for x in measurements if x["client_bound"]]
    if client_bound:
        out.append(
            f"client-bound: {len(client_bound)} measurement(s) within {1 - CLIENT_BOUND:.0%} of "
            f"the load generator's ceiling ({ceiling.throughput:.0f} req/s) at "
            "the top load, flagged client_bound: their figure is the client's limit, not the "
            "server's; more client processes or machines are needed to see the server's"
        )
    short = [
        f"{x['candidate']} @ {x['load']}: {x['throughput']:.0f} of {x['offered_rate']:g} req/s"
        for x in measurements
        if x.get("offered_rate") and x["throughput"] < 0.9 * x["offered_rate"]
    ]
    if short:
        out.append(
            f"open loop: {len(short)} measurement(s) served < 90 % of the offered rate (the server "
            f"or, near {ceiling.throughput:.0f} req/s, the client is saturated): "
            + "; ".join(short[:5])
        )
    unstable = sum(1 for x in measurements if not x.get("stable", True))
    if unstable:
        out.append(f"{unstable} measurement(s) did not stabilise within {spec.max_windows} windows")
    if spec.rounds < 2:
        out.append("rounds: 1: the rules were decided on single readings (no interval)")
    return out


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
