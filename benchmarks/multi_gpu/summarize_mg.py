"""The two-GPU run's record from h200x2.sh's results directory (stdlib only):

    python3 benchmarks/multi_gpu/summarize_mg.py RESULTS_DIR > docs/runs/DATE-multi-gpu-h200x2.json

Tensor parallel: per LLM of the tp2 and tp1 configs, the kernel vLLM chose, measure.py's determinism (alone vs
amid 63) and throughput, vLLM's KV tokens (its log's "GPU KV cache size") against the plan's (`tritonbuild plan
--json`, per GPU), and verify --server's verdict. Instance groups: the gpu-scorer's rows per instance and GPU,
the GPUs' peak utilisation under load, and the loaded answers against the answers alone. A figure not measured
is null.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

CONFIGS = {
    "tp2": ["llama-3-8b-fp16-tp2-invariant", "llama-3-8b-int4-tp2-invariant"],
    "tp1": ["llama-3-8b-fp16-invariant", "llama-3-8b-int4-invariant"],
}
KERNEL = re.compile(r"Using (\w+) for CompressedTensorsWNA16")
KV = re.compile(r"GPU KV cache size: ([\d,]+) tokens")


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _jsonl(path: Path) -> dict[str, dict]:
    rows = (
        [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
        if path.is_file()
        else []
    )
    return {row["model"]: row for row in rows}


def _rate(row: dict | None, streams: int) -> float | None:
    return next(
        (r["tokens_per_s"] for r in (row or {}).get("rows", []) if r["streams"] == streams), None
    )


def _planned(plan: dict | None) -> dict[str, int]:
    return {
        m["name"]: m["extras"]["memory_plan"]["max_kv_tokens"]
        for m in (plan or {}).get("models", [])
        if m.get("extras", {}).get("memory_plan")
    }


def _server_lines(results: Path, cfg: str) -> tuple[list[str], list[int]]:
    """(kernels named, KV token counts in engine start order) from the server log's kept lines."""
    path = results / f"server-mg-{cfg}.lines"
    text = path.read_text(errors="replace") if path.is_file() else ""
    return sorted(set(KERNEL.findall(text))), [int(n.replace(",", "")) for n in KV.findall(text)]


def _verdict(report: dict | None, names: list[str]) -> str | None:
    models = {m["name"]: m for m in (report or {}).get("models", [])}
    if not names or not all(n in models for n in names):
        return None
    return "PASS" if all(models[n].get("passed") for n in names) else "FAIL"


def tensor_parallel(results: Path) -> dict:
    det, tput = _jsonl(results / "determinism.jsonl"), _jsonl(results / "throughput.jsonl")
    out = {"configs": [], "verify": {}}
    for cfg, names in CONFIGS.items():
        planned = _planned(_json(results / f"plan-{cfg}.json"))
        kernels, kv = _server_lines(results, cfg)
        # NOTE: the engines start in name order (fp16 before int4), one KV line per engine (rank 0 logs it)
        for i, name in enumerate(names):
            d, vllm_kv = det.get(name), kv[i] if i < len(kv) else None
            out["configs"].append(
                {
                    "name": name,
                    "tensor_parallel_size": 2 if cfg == "tp2" else 1,
                    "quantization": "int4-w4a16" if "int4" in name else "fp16",
                    "invariant": True,
                    "kernel": ("+".join(kernels) or None) if "int4" in name else "unquantized",
                    "loaded_runs": d and d["repeats"],
                    "ids_identical": d and d["under_load_ids_identical"],
                    "logprobs_identical": d and d["under_load_logprobs_identical"],
                    "tok_s_1": _rate(tput.get(name), 1),
                    "tok_s_64": _rate(tput.get(name), 64),
                    "kv_tokens_vllm": vllm_kv,
                    "kv_tokens_planned": planned.get(name),
                    "plan_vs_vllm_pct": round(100 * (planned[name] / vllm_kv - 1), 2)
                    if vllm_kv and planned.get(name)
                    else None,
                }
            )
        out["verify"][cfg] = _verdict(_json(results / f"verify-{cfg}.json"), names)
    return out


def _gpu_peaks(results: Path) -> dict[str, int]:
    peaks: dict[str, int] = {}
    path = results / "scorer-gpu-samples.csv"
    for row in csv.reader(path.read_text().splitlines()) if path.is_file() else []:
        if len(row) >= 2 and row[1].strip().isdigit():
            peaks[row[0].strip()] = max(peaks.get(row[0].strip(), 0), int(row[1]))
    return peaks


def instance_groups(results: Path) -> dict:
    counts = _json(results / "scorer-counts.json") or []
    load = _json(results / "scorer-load.json") or {}
    rows_per_gpu: dict[str, int] = {}
    for instance in counts:
        if instance.get("kind") == "GPU":
            key = str(instance["device"])
            rows_per_gpu[key] = rows_per_gpu.get(key, 0) + instance["rows"]
    return {
        "model": "gpu-scorer",
        "instances": counts,
        "rows_per_gpu": rows_per_gpu,
        "gpus_serving": sorted(k for k, v in rows_per_gpu.items() if v > 0),
        "peak_utilization_pct": _gpu_peaks(results),
        "loaded_rows": load.get("rows"),
        "differing_rows": load.get("differing_rows"),
        "load_seconds": load.get("seconds"),
        "streams": load.get("streams"),
        "verify": _verdict(_json(results / "verify-scorer.json"), ["gpu-scorer"]),
    }


def summarize(results: Path) -> dict:
    gpu = (results / "gpu.txt").read_text().splitlines() if (results / "gpu.txt").is_file() else []
    vllm = (
        (results / "vllm-version.txt").read_text().strip()
        if (results / "vllm-version.txt").is_file()
        else None
    )
    return {
        "machine": {"gpu": gpu[0].split(",")[0].strip() if gpu else None, "gpus": len(gpu)},
        "vllm": vllm,
        "geometry": "llama-3-8b",
        "tensor_parallel": tensor_parallel(results),
        "instance_groups": instance_groups(results),
    }


if __name__ == "__main__":
    json.dump(summarize(Path(sys.argv[1])), sys.stdout, indent=1)
    sys.stdout.write("\n")
