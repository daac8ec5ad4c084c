"""Soak the config a tune report chose (or, when it kept Triton's default, its best clean batching config, said
so): serve it alone in the embedded tritonserver, record its own answer to each
input sent alone, then keep `--concurrency` clients busy until at least `--answers` answers came back (or
`--max-s` passed), every answer compared bit for bit with that config's own answer alone. Prints one JSON object:
answers compared and differing, throughput, p99, the config.

    python benchmarks/tune/soak.py OUT MODEL REPORT.json [--answers 100000] [--concurrency 64] [--processes 6]

The check is tune's own (determinism: invariant): an answer may not depend on which requests shared its batch
or on the load. Exit 1 when any answer differed or failed, or fewer than --answers came back, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tritonbuild.core.npz import read_npz
from tritonbuild.server.embedded import EmbeddedServer
from tritonbuild.triton.config import parse
from tritonbuild.tune.built import model_and_recipe
from tritonbuild.tune.control import load_with_config
from tritonbuild.tune.loadgen import LoadGenerator
from tritonbuild.tune.probes import GoldensCheck
from tritonbuild.tune.space import Candidate, apply
from tritonbuild.verify.goldens import from_npz_arrays


def chosen_of(report_path: Path) -> tuple[Candidate, str]:
    """The config the report chose; when tune kept Triton's default (or chose nothing), the batching candidate
    with the highest top-load reading among those whose answers never differed, said so."""
    report = json.loads(report_path.read_text())
    winner = report.get("winner")
    if winner and not winner.get("is_default"):
        return _candidate(winner), "the config tune chose"
    top = report.get("top_load")
    clean = [
        c
        for c in report.get("candidates", [])
        if c.get("batching")
        and top in c.get("loads", {})
        and not c.get("answers", {}).get("differing")
        and not c.get("load_error")
    ]
    if not clean:
        raise SystemExit(
            f"{report_path}: no batching config was chosen or measured cleanly at {top}: nothing to soak"
        )
    best = max(clean, key=lambda c: c["loads"][top]["throughput"])
    return _candidate(best), (
        f"not chosen by tune ({report.get('verdict')}): the batching config with the highest "
        f"{top} reading and no differing answer ({best['loads'][top]['throughput']:.0f} req/s)"
    )


def _candidate(entry: dict) -> Candidate:
    fields = {key: entry[key] for key in Candidate.model_fields if key in entry and key != "coords"}
    if fields.get("buckets") is not None:
        fields["buckets"] = tuple(fields["buckets"])
    return Candidate(**fields)


def soak(root: Path, model: str, candidate: Candidate, which: str, args, log: Path) -> dict:
    manifest_model, _loaded, _rpath = model_and_recipe(root, model, None)
    inputs, _goldens = from_npz_arrays(read_npz(root / manifest_model.goldens))
    config = apply(parse((root / model / "config.pbtxt").read_bytes()), candidate)
    outputs = [tensor.name for tensor in manifest_model.outputs]
    scratch = Path(tempfile.mkdtemp(prefix="tritonbuild-soak-"))
    try:
        shutil.copytree(root / model, scratch / model, ignore=shutil.ignore_patterns("__pycache__"))
        with EmbeddedServer(scratch, log_path=log) as server:
            load_with_config(f"http://{server.http_url}", model, config)
            check = GoldensCheck(server.grpc_url, manifest_model, inputs, None)
            own = check.answers_alone()
            check.close()
            tally = {"compared": 0, "differing": 0, "errors": 0, "windows": [], "p99_ms": []}
            t0 = time.monotonic()
            with LoadGenerator(
                server.grpc_url, model, inputs, own, outputs, processes=args.processes
            ) as generator:
                while tally["compared"] < args.answers and time.monotonic() - t0 < args.max_s:
                    result = generator.measure(
                        concurrency=args.concurrency, window_s=2.0, stable_windows=5, max_windows=5
                    )
                    tally["compared"] += result.requests
                    tally["differing"] += result.mismatches
                    tally["errors"] += result.errors
                    tally["windows"] += result.window_throughputs
                    tally["p99_ms"].append(round(result.p99_ms, 2))
                    if result.first_mismatch and "first_mismatch" not in tally:
                        tally["first_mismatch"] = result.first_mismatch
            tally["seconds"] = round(time.monotonic() - t0, 1)
            tally["throughput"] = round(sum(tally["windows"]) / max(1, len(tally["windows"])), 1)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "model": model,
        "config": candidate.label,
        "which": which,
        "load": f"c{args.concurrency}",
        "processes": args.processes,
        "inputs": len(inputs),
        "compare": "bit for bit with the config's own answer to the input sent alone",
        **tally,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("model")
    parser.add_argument("report", type=Path)
    parser.add_argument("--answers", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--max-s", type=float, default=120.0)
    parser.add_argument("--log", type=Path, default=Path("soak-tritonserver.log"))
    args = parser.parse_args(argv)
    if not args.report.is_file():
        print(f"{args.report}: no tune report", file=sys.stderr)
        return 2
    result = soak(args.root, args.model, *chosen_of(args.report), args, args.log)
    print(json.dumps(result, indent=1))
    return (
        0
        if not result["differing"] and not result["errors"] and result["compared"] >= args.answers
        else 1
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
