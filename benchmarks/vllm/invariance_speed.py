"""Issue 45's record, what invariance costs at Llama-3-8B geometry on one GPU kind (stdlib only):

    python3 benchmarks/vllm/invariance_speed.py RESULTS_DIR KERNEL_RECORD.json \\
        > docs/runs/DATE-llm-invariance-speed-GPU.json

RESULTS_DIR: what h200_8b.sh leaves in /tmp/vw/results (throughput-8b.jsonl with one line per model and round:
each `throughput-8b` step is a round; determinism-8b.jsonl, verify-8b-invariant*.json, soak-8b.jsonl, gpu.txt,
server logs' kernel lines). KERNEL_RECORD.json: w4a16_record.py's output on the same GPU kind. The record holds the
kernel per row count, end to end per config (median, min and max over the rounds), the invariance checks of both,
whether verify --server found the committed goldens' answers (goldens_reproduced: not batch invariance, the same
bits as an earlier run), and each target of the issue with the figure it was judged on; a figure not measured is
null and its target unmet.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

try:
    from benchmarks.vllm import summarize_8b
except ImportError:  # run as a script: its own folder is on the path
    import summarize_8b

KERNEL_FIELDS = ("int4_invariant_ms", "fp16_cublas_ms", "int4_default_ms", "bandwidth_fraction")


def rounds(path: Path) -> dict[str, dict[int, list[float]]]:
    """model -> streams -> tok/s of every round, in file order (throughput-8b.jsonl keeps every line)."""
    out: dict[str, dict[int, list[float]]] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip().startswith("{"):
                row = json.loads(line)
                for r in row["rows"]:
                    out.setdefault(row["model"], {}).setdefault(r["streams"], []).append(
                        r["tokens_per_s"]
                    )
    return out


def spread(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def end_to_end(results: Path) -> list[dict]:
    measured = rounds(results / "throughput-8b.jsonl")
    out = []
    for name, quantization, invariant in summarize_8b.CONFIGS:
        by_streams = measured.get(name, {})
        out.append({
            "name": name,
            "quantization": quantization,
            "invariant": invariant,
            "kernel": summarize_8b.kernel(results, invariant, quantization),
            "tok_s_1": spread(by_streams.get(1, [])),
            "tok_s_64": spread(by_streams.get(64, [])),
            "rounds": min((len(v) for v in by_streams.values()), default=0),
        })  # fmt: skip
    return out


def ratios(configs: list[dict]) -> dict:
    """invariant median / default median per quantization and stream count (None where one is missing)."""
    out = {}
    for quantization in ("fp16", "int4-w4a16"):
        pair = {c["invariant"]: c for c in configs if c["quantization"] == quantization}
        out[quantization] = {}
        for key in ("tok_s_1", "tok_s_64"):
            inv, default = (pair.get(True) or {}).get(key), (pair.get(False) or {}).get(key)
            out[quantization][key] = inv["median"] / default["median"] if inv and default else None
    return out


def invariance_checks(results: Path, kernel_record: dict) -> dict[str, bool]:
    """Every check of the run, by name: the kernel's, measure.py determinism's (alone and under load, ids and
    log-probs), verify --server's under load per invariant model, the soak's."""
    checks = {f"kernel_{k}": bool(v) for k, v in kernel_record.get("invariance_checks", {}).items()}
    for name, row in summarize_8b._jsonl(results / "determinism-8b.jsonl").items():
        if name.endswith("-invariant"):
            for what in ("alone", "under_load"):
                identical = min(row[f"{what}_ids_identical"], row[f"{what}_logprobs_identical"])
                checks[f"{name}_{what}_identical"] = identical == row["repeats"]
    for name, under_load, _ in verify_reports(results):
        checks[f"{name}_verify_server_under_load"] = under_load
    for name, row in summarize_8b._jsonl(results / "soak-8b.jsonl").items():
        if name.endswith("-invariant"):
            checks[f"{name}_soak"] = row["differing"] == 0
    return checks


def verify_reports(results: Path) -> list[tuple[str, bool, bool]]:
    """(model, under load: bit-identical alone and amid 63 others, goldens: the whole verdict, the
    committed goldens included) per invariant model, and over every verify --server report of the run
    (verify-8b-invariant*.json: a step that runs again keeps the earlier one under another name), a
    model's check passing only if it passed in each. A verify that found no goldens of its machine
    class recorded them (goldens_recorded_on null): it compared nothing, so reproduced nothing."""
    by_model: dict[str, list[bool]] = {}
    for path in sorted(results.glob("verify-8b-invariant*.json")):
        for m in (summarize_8b._json(path) or {}).get("models", []):
            load = m.get("under_load") or {}
            under_load = (
                m.get("batch_invariance") == "invariant"
                and bool(load.get("answers"))
                and load.get("differing") == 0
            )
            was = by_model.setdefault(m["name"], [True, True])
            compared = "goldens_recorded_on" not in m or m["goldens_recorded_on"] is not None
            was[0], was[1] = was[0] and under_load, was[1] and bool(m["passed"]) and compared
    return [(name, load, goldens) for name, (load, goldens) in by_model.items()]


def _target(what: str, value: float | None, at_least: float) -> dict:
    return {
        "what": what,
        "value": value,
        "at_least": at_least,
        "met": value is not None and value >= at_least,
    }


def targets(kernel: dict, ratio: dict, checks: dict, goldens: dict) -> list[dict]:
    one, sixty_four = kernel.get("1") or {}, kernel.get("64") or {}
    cublas_64, inv_64 = sixty_four.get("fp16_cublas_ms"), sixty_four.get("int4_invariant_ms")
    return [
        _target("kernel: bandwidth fraction at 1 row", one.get("bandwidth_fraction"), 0.60),
        _target(
            "kernel: cuBLAS fp16 ms / invariant INT4 ms at 64 rows",
            cublas_64 / inv_64 if cublas_64 and inv_64 else None,
            1.0,
        ),
        _target("INT4 invariant / default tok/s, 1 stream", ratio["int4-w4a16"]["tok_s_1"], 1.0),
        _target("INT4 invariant / default tok/s, 64 streams", ratio["int4-w4a16"]["tok_s_64"], 0.9),
        _target("fp16 invariant / default tok/s, 1 stream", ratio["fp16"]["tok_s_1"], 0.75),
        _target("fp16 invariant / default tok/s, 64 streams", ratio["fp16"]["tok_s_64"], 0.75),
        {"what": "every invariance check passing", "met": bool(checks) and all(checks.values())},
        {
            "what": "answers equal the committed goldens (verify --server, every invariant model)",
            "met": bool(goldens) and all(goldens.values()),
        },
    ]


def record(results: Path, kernel_path: Path) -> dict:
    kernel_record = json.loads(kernel_path.read_text())
    kernel = {
        str(m): {f: row.get(f) for f in KERNEL_FIELDS}
        | {"int4_default_skipped": row.get("int4_default_skipped")}
        for m, row in kernel_record["kernel"].items()
    }
    configs = end_to_end(results)
    ratio = ratios(configs)
    checks = invariance_checks(results, kernel_record)
    goldens = {name: same for name, _, same in verify_reports(results)}
    e2e = summarize_8b.summarize(results)
    return {
        "what": "issue 45: what batch invariance costs at Llama-3-8B geometry, kernel and end to end through Triton",
        "made_by": "benchmarks/vllm/invariance_speed.py",
        "machine": {
            "gpu": e2e["machine"]["gpu"],
            "kernel_gpu": kernel_record["machine"]["gpu"],
            "vllm": e2e["vllm"],
            "kernel_machine": kernel_record["machine"],
        },
        "kernel_date": kernel_record.get("date"),
        "kernel": kernel,
        "end_to_end": configs,
        "invariant_over_default": ratio,
        "invariance_checks": checks,
        # not batch invariance: the same answers as the goldens committed from an earlier run
        "goldens_reproduced": goldens,
        "targets": targets(kernel, ratio, checks, goldens),
    }


if __name__ == "__main__":
    json.dump(record(Path(sys.argv[1]), Path(sys.argv[2])), sys.stdout, indent=1)
    sys.stdout.write("\n")
