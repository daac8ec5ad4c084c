"""The 8B determinism run's record from h200_8b.sh's results directory (stdlib only):

    python3 benchmarks/vllm/summarize_8b.py RESULTS_DIR > docs/runs/DATE-llm-determinism-h200.json

Reads determinism-8b.jsonl, soak-8b.jsonl, throughput-8b.jsonl (one JSON object per model, from measure.py),
verify-8b-{default,invariant}.json (tritonbuild verify --json), server-8b-{config}.log (vLLM's own line
"Using <kernel> for CompressedTensorsWNA16", vllm 0.22.0 compressed_tensors_wNa16.py:111-113), gpu.txt and
vllm-version.txt. A figure not measured is null.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

CONFIGS = [
    ("llama-3-8b-fp16", "fp16", False),
    ("llama-3-8b-int4", "int4-w4a16", False),
    ("llama-3-8b-fp16-invariant", "fp16", True),
    ("llama-3-8b-int4-invariant", "int4-w4a16", True),
]
KERNEL_LINE = re.compile(r"Using (\w+) for CompressedTensorsWNA16")


def _jsonl(path: Path) -> dict[str, dict]:
    """model -> its last record (a later run of a step replaces an earlier one)."""
    out: dict[str, dict] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line.startswith("{"):
                row = json.loads(line)
                out[row["model"]] = row
    return out


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def kernel(results: Path, invariant: bool, quantization: str) -> str | None:
    """The W4A16 kernel vLLM chose in that server (one line per engine process; both engines of a config share
    a log, and the fp16 model has no W4A16 layer): the distinct kernels named, joined by '+' if they differ."""
    if quantization == "fp16":
        return "unquantized"
    log = results / f"server-8b-{'invariant' if invariant else 'default'}.log"
    lines = results / f"server-8b-{'invariant' if invariant else 'default'}.lines"
    text = "".join(p.read_text(errors="replace") for p in (lines, log) if p.is_file())
    found = sorted(set(KERNEL_LINE.findall(text)))
    return "+".join(found) if found else None


def _rate(row: dict | None, streams: int) -> float | None:
    for r in (row or {}).get("rows", []):
        if r["streams"] == streams:
            return r["tokens_per_s"]
    return None


def _under_load(report: dict | None, names: list[str]) -> str | None:
    """PASS when every model of the config answered the same under load as alone (verify's batch_invariance
    'invariant' and no mismatches), FAIL when one answered differently; None when verify did not run or a model
    was not checked under load (it did not load: see verify_notes)."""
    if not report:
        return None
    models = {m["name"]: m for m in report.get("models", [])}
    if not all(n in models and models[n].get("under_load") for n in names):
        return None
    ok = all(
        models[n]["batch_invariance"] == "invariant" and not models[n].get("mismatches")
        for n in names
    )
    return "PASS" if ok else "FAIL"


def _verify_notes(report: dict | None) -> list[str]:
    """Why a model of a verify run was not checked under load (its load error's first line)."""
    return [
        f"{m['name']}: not checked under load: {(m.get('load_error') or m.get('infer_error')).splitlines()[0]}"
        for m in (report or {}).get("models", [])
        if not m.get("under_load") and (m.get("load_error") or m.get("infer_error"))
    ]


def _loaded(report: dict | None, name: str) -> dict | None:
    """verify --server's under-load account of one model: answers amid the others, how many kept ids / log-probs."""
    model = next((m for m in (report or {}).get("models", []) if m["name"] == name), None)
    load = (model or {}).get("under_load")
    if not load:
        return None
    return {
        "loaded_runs": load["answers"],
        "ids_identical": load["answers"] - load["ids_differing"],
        "logprobs_identical": load["answers"] - load["differing"],
        "others": load["others"],
    }


def summarize(results: Path) -> dict:
    det = _jsonl(results / "determinism-8b.jsonl")
    soak = _jsonl(results / "soak-8b.jsonl")
    tput = _jsonl(results / "throughput-8b.jsonl")
    reports = {
        False: _json(results / "verify-8b-default.json"),
        True: _json(results / "verify-8b-invariant.json"),
    }
    configs = []
    for name, quantization, invariant in CONFIGS:
        d, s, t = det.get(name), soak.get(name), tput.get(name)
        # NOTE: measure.py determinism when it ran, else verify --server's own under-load rounds
        v = None if d else _loaded(reports[invariant], name)
        configs.append(
            {
                "name": name,
                "quantization": quantization,
                "invariant": invariant,
                "kernel": kernel(results, invariant, quantization),
                "loaded_runs": d["repeats"] if d else v and v["loaded_runs"],
                "ids_identical": d["under_load_ids_identical"] if d else v and v["ids_identical"],
                "logprobs_identical": d["under_load_logprobs_identical"]
                if d
                else v and v["logprobs_identical"],
                "loaded_source": "measure.py determinism"
                if d
                else "verify --server under_load"
                if v
                else None,
                "soak_answers": s["answers"] if s else None,
                "soak_differing": s["differing"] if s else None,
                "tok_s_1": _rate(t, 1),
                "tok_s_64": _rate(t, 64),
            }
        )
    gpu = (
        (results / "gpu.txt").read_text().split(",")[0].strip()
        if (results / "gpu.txt").is_file()
        else None
    )
    vllm = (
        (results / "vllm-version.txt").read_text().strip()
        if (results / "vllm-version.txt").is_file()
        else None
    )
    return {
        "machine": {"gpu": gpu},
        "vllm": vllm,
        "geometry": "llama-3-8b",
        "configs": configs,
        "verify": {
            "default_under_load": _under_load(reports[False], [c[0] for c in CONFIGS if not c[2]]),
            "invariant_under_load": _under_load(reports[True], [c[0] for c in CONFIGS if c[2]]),
        },
        "verify_notes": _verify_notes(reports[False]) + _verify_notes(reports[True]),
    }


if __name__ == "__main__":
    json.dump(summarize(Path(sys.argv[1])), sys.stdout, indent=1)
    sys.stdout.write("\n")
