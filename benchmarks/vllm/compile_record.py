"""Where the invariant fp16 model's bits came from (2026-12-07, one H100): the record of the fresh-compile starts and of
Inductor's deterministic mode in vLLM 0.22's compile, made from the files the GPU run brought back (DIR, committed
beside the record):

    python3 benchmarks/vllm/compile_record.py docs/runs/2026-12-07-compile-reproducibility-h100 \
        > docs/runs/2026-12-07-compile-reproducibility-h100.json

DIR holds verify-fresh-compile-N.json (`h200_8b.sh verify-8b` reports of server starts that compiled afresh:
VLLM_DISABLE_COMPILE_CACHE=1 TORCHINDUCTOR_FORCE_DISABLE_CACHES=1), deterministic-refusal.lines (the server log's
traceback with TORCHINDUCTOR_DETERMINISTIC=1), server-invariant-combo-{on,off}.engine-lines (the engine lines of a
start as tritonbuild built it before the combo_kernels row, and of one whose model.json set both Inductor options
false), combo-off-fp16-kv.lines, throughput-8b.jsonl and throughput-sampled-8b.jsonl (measure.py, one reading per
model and stream count), gpu.txt."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

FRAME = re.compile(
    r'File "[^"]*/site-packages/(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\w+)'
)
INDUCTOR = re.compile(r"'inductor_compile_config': (\{[^}]*\})")
ENGINE_MODEL = re.compile(r"with config: model='[^']*/(?P<model>[^/']+)/\d+/model'")


def fresh_compiles(d: Path) -> list[dict]:
    """Per verify report: each model's outcome against the committed goldens, and its seeded-sampling path."""
    starts = []
    for path in sorted(d.glob("verify-fresh-compile-*.json")):
        report = json.loads(path.read_text())
        models = {}
        for m in report["models"]:
            load = m.get("under_load") or {}
            seeded = {p["path"]: p for p in load.get("paths", [])}.get("seeded-sampling", {})
            models[m["name"]] = {
                "matches_committed_goldens": not m["mismatches"],
                "differing_outputs": sorted(
                    {f"{x['output']} (sample {x['sample']})" for x in m["mismatches"]}
                ),
                "batch_invariance": m["batch_invariance"],
                "seeded_sampling": {
                    **{k: seeded.get(k) for k in ("answers", "differing")},
                    "others": load.get("others"),
                },
            }
        starts.append({"report": path.name, "models": models})
    return starts


def agree(starts: list[dict], model: str) -> bool:
    """Whether every start's answers stood in the same relation to the goldens (output by output)."""
    return len({tuple(s["models"][model]["differing_outputs"]) for s in starts}) == 1


def refusal(d: Path) -> dict:
    frames = []
    for line in (d / "deterministic-refusal.lines").read_text().splitlines():
        if match := FRAME.search(line):
            frame = f"{match['path']}:{match['line']} {match['func']}"
            if frame not in frames:
                frames.append(frame)
    return {"env": "TORCHINDUCTOR_DETERMINISTIC=1", "engine_started": False, "frames": frames}


def engine_configs(path: Path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        if (model := ENGINE_MODEL.search(line)) and (config := INDUCTOR.search(line)):
            out[model["model"]] = ast.literal_eval(config.group(1))
    return out


def throughput(d: Path) -> list[dict]:
    """Sampled over greedy tok/s per model and stream count, from the last reading of each (one server start)."""
    greedy, sampled = {}, {}
    for name, into in (("throughput-8b.jsonl", greedy), ("throughput-sampled-8b.jsonl", sampled)):
        for line in (d / name).read_text().splitlines():
            row = json.loads(line)
            for r in row["rows"]:
                into[(row["model"], r["streams"])] = r["tokens_per_s"]
    return [
        {
            "model": m,
            "streams": s,
            "greedy_tok_s": greedy[m, s],
            "sampled_tok_s": sampled[m, s],
            "sampled_over_greedy": round(sampled[m, s] / greedy[m, s], 3),
        }
        for (m, s) in sorted(greedy)
        if (m, s) in sampled
    ]


def record(d: Path) -> dict:
    starts = fresh_compiles(d)
    models = sorted(starts[0]["models"]) if starts else []
    return {
        "what": "where the invariant models' bits come from: fresh compiles, one H100; Inductor's deterministic "
        "mode in vLLM 0.22's compile; seeded sampling under load; sampled vs greedy tok/s",
        "date": "2026-12-07",
        "command": f"python3 benchmarks/vllm/compile_record.py {d}",
        "machine": (d / "gpu.txt").read_text().strip(),
        "fresh_compiles": starts,
        "fresh_compiles_agree": {m: agree(starts, m) for m in models},
        "fresh_compiles_agree_means": "each start's answers stood in the same relation to the committed goldens, "
        "output by output: identical where every start matched them; a start that differed from them in other "
        "outputs than another did answered differently from it; starts differing in the same outputs were not "
        "compared with each other",
        "deterministic_mode": refusal(d),
        "inductor_compile_config": {
            "as_built_before": engine_configs(d / "server-invariant-combo-on.engine-lines"),
            "combo_kernels_row": engine_configs(d / "server-invariant-combo-off.engine-lines"),
        },
        "combo_off_with_deterministic_mode": (
            "both engines compiled without a refusal; the INT4 engine captured its CUDA graphs; the fp16 engine "
            "then found 0.08 GiB for its KV cache (both engines profiled memory at once) and did not start: "
            "not verified (combo-off-fp16-kv.lines)"
        ),
        "throughput": throughput(d),
        "upstream": {
            "vllm 0.22.0 vllm/config/compilation.py:957-967": "torch >= 2.9, not CPU, neither key given: "
            "combo_kernels and benchmark_combo_kernel set True",
            "torch 2.11.0 torch/_inductor/scheduler.py:6892-6906 speedup_by_combo_kernel": "returns True "
            "without timing when benchmark_combo_kernel is off; else times the fused and separate kernels",
            "torch 2.11.0 torch/_inductor/config.py:854,879,881,884": "deterministic from "
            "TORCHINDUCTOR_DETERMINISTIC; combo_kernels False, benchmark_combo_kernel False, "
            "combo_kernels_autotune 1 by default",
        },
    }


if __name__ == "__main__":
    json.dump(record(Path(sys.argv[1])), sys.stdout, indent=1)
    sys.stdout.write("\n")
