"""Fresh-compile runs (one H100 each, issue 45 and the determinism of invariant models): two server starts of the
invariant 8B models, each compiling afresh (since `h200_8b.sh fresh-goldens`, the second serves the repository as
the first's `verify --record` left it); where the run measured it, the four configs' throughput in interleaved
rounds. Made from the files the GPU run brought back (DIR, committed beside the record):

    python3 benchmarks/vllm/fresh_compile_record.py docs/runs/2026-12-07-fresh-compile-lm-head-h100 \\
        > docs/runs/2026-12-07-fresh-compile-lm-head-h100.json          # with throughput
    python3 benchmarks/vllm/fresh_compile_record.py docs/runs/2026-12-07-fresh-goldens-deterministic-h100 \\
        > docs/runs/2026-12-07-fresh-goldens-deterministic-h100.json    # Inductor's deterministic mode, no throughput

DIR holds verify-fresh-compile-N.json (`h200_8b.sh verify-8b --record` reports, start N), recorded-fresh-compile-N.
<model>.npz (the goldens that start's `--record` wrote for a model with none of this machine class yet),
server-invariant.engine-lines (`grep -n` of the last invariant start's log: its engines' config lines, with their
Inductor options, and the plugin's lm_head and W4A16 lines), throughput-8b.jsonl
(measure.py, one line per model and round; optional), gpu.txt and vllm-version.txt."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import numpy as np

try:
    from benchmarks.vllm import compile_record, invariance_speed
except ImportError:  # run as a script: its own folder is on the path
    import compile_record
    import invariance_speed

CONFIGS = {  # quantization: (default model, invariant model)
    "fp16": ("llama-3-8b-fp16", "llama-3-8b-fp16-invariant"),
    "int4-w4a16": ("llama-3-8b-int4", "llama-3-8b-int4-invariant"),
}


def starts(d: Path) -> list[dict]:
    """Per start's verify report: each model's verdict, batch invariance and what differed from its goldens."""
    out = []
    for path in sorted(d.glob("verify-fresh-compile-*.json")):
        models = {}
        for m in json.loads(path.read_text())["models"]:
            models[m["name"]] = {
                "passed": m["passed"],
                "batch_invariance": m["batch_invariance"],
                "compared_with": compared_with(m),
                "differing_outputs": sorted(
                    {f"{x['output']} (sample {x['sample']})" for x in m["mismatches"]}
                ),
                "cause": m.get("cause"),
            }
        out.append({"report": path.name, "models": models})
    return out


def compared_with(model: dict) -> str:
    """What a start's answers were compared with: the goldens' machine class where the report names it; where a
    --record found the goldens already there and equal, its note says so (a tritonbuild made after 2026-12-07:
    before, such a start's report read like the first's); else nothing the report says."""
    if model["goldens_recorded_on"]:
        return model["goldens_recorded_on"]
    if any("answers equal the goldens recorded before" in n for n in model.get("notes", [])):
        return "the goldens recorded before (answers equal)"
    return "not named in the report (goldens recorded by this start, or a tritonbuild that did not say)"


def logprobs(cell) -> list[float]:
    """The log-probs of one recorded logprobs output (vLLM backend's JSON text, one entry per token)."""
    text = bytes(cell.flat[0][1]).decode()
    return [v["logprob"] for entry in json.loads(text) for v in entry.values()]


def recorded_outputs(keys: list[str]) -> list[str]:
    """The recorded machine class's outputs in a goldens file: the last class added (class.N.output.*) where the
    file holds several, else its only class's (output.*)."""
    added = sorted({int(k.split(".")[1]) for k in keys if k.startswith("class.")})
    prefix = f"class.{added[-1]}.output." if added else "output."
    return [k for k in keys if k.startswith(prefix)]


def recorded_agree(d: Path) -> dict:
    """Per model recorded by two starts: per output, whether the bytes are the same, and for log-probs the
    largest difference and how many tokens' log-probs differ."""
    out = {}
    for first in sorted(d.glob("recorded-fresh-compile-1.*.npz")):
        model = first.name.split(".", 1)[1].removesuffix(".npz")
        a = np.load(first, allow_pickle=False)
        b = np.load(first.with_name(first.name.replace("-1.", "-2.", 1)), allow_pickle=False)
        outputs = {}
        for key in sorted(recorded_outputs(a.files)):
            entry = {"identical": bool(np.array_equal(a[key], b[key]))}
            if key.endswith(".logprobs"):
                la, lb = logprobs(a[key]), logprobs(b[key])
                diffs = [abs(x - y) for x, y in zip(la, lb, strict=True)]
                entry.update(
                    tokens=len(diffs), differing=sum(x > 0 for x in diffs), max_abs_diff=max(diffs)
                )
            outputs[key.split("output.", 1)[1]] = entry
        out[model] = {
            "outputs": outputs,
            "identical": all(o["identical"] for o in outputs.values()),
        }
    return out


def throughput(d: Path) -> dict | None:
    """Per model and stream count: tok/s of each round in run order, median, min, max; per quantization the
    invariant model's median over the default's, and its range over the rounds paired in run order."""
    if not (d / "throughput-8b.jsonl").is_file():
        return None  # a run that measured no throughput
    rounds = invariance_speed.rounds(d / "throughput-8b.jsonl")
    models = {
        m: {str(s): {"rounds": v, "median": statistics.median(v), "min": min(v), "max": max(v)}
            for s, v in by_streams.items()}
        for m, by_streams in rounds.items()
    }  # fmt: skip
    ratios = {}
    for quant, (default, invariant) in CONFIGS.items():
        for s in ("1", "64"):
            inv, dft = models[invariant][s], models[default][s]
            paired = [x / y for x, y in zip(inv["rounds"], dft["rounds"], strict=False)]
            ratios[f"{quant}_{s}_streams"] = {
                "median_over_median": inv["median"] / dft["median"],
                "paired_rounds_min": min(paired),
                "paired_rounds_max": max(paired),
            }
    return {"models": models, "invariant_over_default": ratios}


def engine_lines(d: Path) -> dict:
    """The engines' Inductor options (compile_record.engine_configs reads them per model, as the last run's
    record did; one shown, and whether every engine's are the same) and how many log lines say the plugin took
    the lm_head / the W4A16 linears (lines, not engines: an engine logs the lm_head once per process that
    loads it)."""
    path = d / "server-invariant.engine-lines"
    configs = compile_record.engine_configs(path)
    text = path.read_text()
    return {
        "inductor_compile_config": next(iter(configs.values()), None),
        "engines_with_inductor_options": sorted(configs),
        "every_engine_same_inductor_options": len(
            {json.dumps(c, sort_keys=True) for c in configs.values()}
        )
        == 1,
        "lm_head_taken_lines": text.count("linear for the lm_head"),
        "w4a16_kernel_lines": text.count("Using TritonbuildInvariantW4A16Kernel"),
    }


def record(d: Path) -> dict:
    return {
        "what": "two fresh-compile starts of the invariant 8B models (each compiled afresh: "
        "VLLM_DISABLE_COMPILE_CACHE=1 TORCHINDUCTOR_FORCE_DISABLE_CACHES=1) with the Inductor options the build "
        "writes (engines), the plugin's fp16 linear taking the lm_head; where the run measured it, the four "
        "configs' throughput in interleaved rounds (end_to_end)",
        "made_by": f"python3 benchmarks/vllm/fresh_compile_record.py {d}",
        "machine": {"gpu": (d / "gpu.txt").read_text().strip(), "vllm": (d / "vllm-version.txt").read_text().strip()},
        "engines": engine_lines(d),
        "starts": starts(d),
        "recorded_by_both_starts": recorded_agree(d),
        "end_to_end": throughput(d),
    }  # fmt: skip


def main() -> int:
    print(json.dumps(record(Path(sys.argv[1])), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
