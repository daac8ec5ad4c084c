"""The tune report: every measurement, default vs tuned per load, the machine, server and client versions."""

from __future__ import annotations

import json
import os
import platform
import urllib.error
import urllib.request
from contextlib import suppress
from importlib import metadata

import numpy as np

from tritonbuild.core.toolchain import fingerprint
from tritonbuild.tune import search
from tritonbuild.tune.space import Candidate

CLIENT_BOUND = 0.85  # a candidate within 85 % of the empty model's throughput is limited by the client


def server_version_of(url: str) -> str:
    try:
        with urllib.request.urlopen(f"{url}/v2", timeout=5) as response:
            return json.loads(response.read()).get("version", "?")
    except (urllib.error.URLError, OSError, ValueError):
        return "?"


def client_versions() -> dict:
    out = {}
    for pkg in ("tritonclient", "grpcio", "numpy", "protobuf", "nvidia-pytriton", "torch"):
        with suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out


def candidate_dict(candidate: Candidate, base_instances) -> dict:
    return {"label": candidate.label, **candidate.model_dump(exclude={"coords"}),
            "recipe_values": candidate.recipe_values(base_instances)}


def build_report(manifest_model, spec, grid, loads, ev, default, winner, ceiling, verifications, load_errors, notes, *,
            brute, processes, server_version, elapsed, no_verify, base_instances) -> dict:
    tc = fingerprint()
    top = loads[-1]
    grid_size = len({default, *grid.all()}) * len(loads)
    measurements = []
    for candidate, load in ev.order:
        point = ev.results[(candidate, load)]
        measurements.append({"candidate": candidate.label, "load": load,
                             **{k: v for k, v in point.extra.items() if k != "load"},
                             "throughput": round(point.throughput, 3), "p99_ms": point.p99_ms, "errors": point.errors,
                             "mismatches": point.mismatches})
    for load, point in ev.default_again.items():
        measurements.append({"candidate": "default (again, after the search)", "load": load,
                             **{k: v for k, v in point.extra.items() if k != "load"},
                             "throughput": round(point.throughput, 3), "p99_ms": point.p99_ms, "errors": point.errors,
                             "mismatches": point.mismatches})
    cands = sorted({candidate for candidate, _ in ev.order},
                   key=lambda candidate: (not candidate.is_default, candidate.label))
    per_cand = []
    for candidate in cands:
        v = ev.verdict(candidate) if all((candidate, lo) in ev.results for lo in loads) else None
        per_cand.append({**candidate_dict(candidate, base_instances),
                         "loads": {lo: point_dict(ev.results[(candidate, lo)]) for lo in loads
                                   if (candidate, lo) in ev.results},
                         "feasible": None if v is None else v.feasible, "reasons": [] if v is None else v.reasons,
                         "load_error": load_errors.get(candidate)})
    comparison = {}
    if winner is not None:
        for lo in loads:
            default_point, winner_point = ev.results[(default, lo)], ev.results[(winner, lo)]
            again = ev.default_again.get(lo)
            if again is not None and again.throughput > default_point.throughput:
                default_point = again  # the baseline is the better of the default's two measurements
            comparison[lo] = {"default": point_dict(default_point), "tuned": point_dict(winner_point),
                              "default_measurements": [point_dict(ev.results[(default, lo)])] +
                              ([point_dict(again)] if again is not None else []),
                              "ratio": round(winner_point.throughput / default_point.throughput, 4)
                              if default_point.throughput else None}
    low = loads[0]
    client_bound = [x["candidate"] + " @ " + x["load"] for x in measurements
                    if x["load"] == top and ceiling.throughput and x["throughput"] >= CLIENT_BOUND * ceiling.throughput]
    out_notes = list(notes)
    if client_bound:
        out_notes.append(f"client-bound: {len(client_bound)} measurement(s) reached >= {CLIENT_BOUND:.0%} of the "
                         f"load generator's ceiling ({ceiling.throughput:.0f} req/s): more client processes or "
                         "machines are needed to see the server's limit")
    short = [f"{x['candidate']} @ {x['load']}: {x['throughput']:.0f} of {x['offered_rate']:g} req/s"
             for x in measurements if x.get("offered_rate") and x["throughput"] < 0.9 * x["offered_rate"]]
    if short:
        out_notes.append(f"open loop: {len(short)} measurement(s) served < 90 % of the offered rate (the server or, "
                         f"near {ceiling.throughput:.0f} req/s, the client is saturated): " + "; ".join(short[:5]))
    unstable = sum(1 for x in measurements if not x.get("stable", True))
    if unstable:
        out_notes.append(f"{unstable} measurement(s) did not stabilise within {spec.max_windows} windows")
    closest = None
    if winner is None:
        # the candidate that misses by the least: its worst relative shortfall over the SLA and the default
        def shortfall(candidate) -> float:
            worst = 0.0
            for lo in loads:
                point = ev.results[(candidate, lo)]
                if point.errors or (point.mismatches and ev.exact_under_load) or candidate in ev.rejected:
                    return float("inf")
                if spec.sla_p99_ms:
                    worst = max(worst, point.p99_ms / spec.sla_p99_ms - 1)
                if not candidate.is_default and point.throughput > 0:
                    worst = max(worst, spec.min_vs_default * ev.baseline(lo) / point.throughput - 1)
            return worst

        full = [candidate for candidate in cands if all((candidate, lo) in ev.results for lo in loads)]
        if full:
            candidate = min(full, key=shortfall)
            worst = max(ev.results[(candidate, lo)].p99_ms for lo in loads)
            closest = {"label": candidate.label, "reasons": ev.verdict(candidate).reasons, "worst_p99_ms": worst,
                       "shortfall": round(shortfall(candidate), 4),
                       "sla_miss_ms": round(worst - spec.sla_p99_ms, 3) if spec.sla_p99_ms else None}
    rejected_unsafe = [{"label": candidate.label, "reason": why} for candidate, why in ev.rejected.items()]
    return {
        "schema_version": 1, "model": manifest_model.name, "version": manifest_model.version,
        "backend": manifest_model.backend, "target": manifest_model.target,
        "search": "brute" if brute else "quick", "measurements_made": ev.count,
        "grid_measurements": grid_size, "measurement_share": round(ev.count / grid_size, 4),
        "loads": loads, "top_load": top,
        "sla_p99_ms": spec.sla_p99_ms, "min_vs_default": spec.min_vs_default,
        "batch_invariance": manifest_model.verify.batch_invariance, "verified_with_goldens": not no_verify,
        "tune": spec.model_dump(mode="json"),
        "ceiling": {"model": "empty python model", **ceiling.to_dict()},
        "default": candidate_dict(default, base_instances),
        "winner": None if winner is None else candidate_dict(winner, base_instances),
        "comparison": comparison,
        "high_load_ratio": comparison.get(top, {}).get("ratio"),
        "low_load_ratio": comparison.get(low, {}).get("ratio"),
        "closest": closest, "rejected_not_bit_exact": rejected_unsafe, "verifications": verifications,
        "candidates": per_cand, "measurements": measurements, "notes": out_notes,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "gpu": tc.get("gpu_name"), "gpu_driver": tc.get("driver_version") or tc.get("nvidia_driver"),
                    "load_processes": processes},
        "server": {"tritonserver": server_version}, "client": client_versions(), "elapsed_s": round(elapsed, 1),
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
    return {"throughput": round(point.throughput, 2), "p50_ms": e.get("p50_ms"), "p95_ms": e.get("p95_ms"),
            "p99_ms": point.p99_ms if np.isfinite(point.p99_ms) else None, "errors": point.errors,
            "mismatches": point.mismatches,
            "stable": e.get("stable")}
