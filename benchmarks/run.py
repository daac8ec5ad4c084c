"""tritonbuild benchmarks. One command: `python benchmarks/run.py [--size-mib 1024]`.

Prints ratios measured side by side in the same run (the machines are noisy):
- verify wall time of the bundled examples (embedded tritonserver start + load + goldens), target < 15 s;
- manifest hashing throughput ÷ `sha256sum` on the same files, target >= 0.9.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def bench_verify(work: Path) -> dict:
    from builder import api

    os.chdir(ROOT)
    os.environ["TRITONBUILD_CACHE_DIR"] = str(work / "cache")
    out = work / "examples"
    t0 = time.perf_counter()
    api.build_repository([ROOT / "recipes" / "examples"], out)
    build_s = time.perf_counter() - t0
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        report = api.verify_repository(out)
        times.append(time.perf_counter() - t0)
        assert report.passed, report.model_dump_json(indent=2)
    return {"build_cold_s": round(build_s, 2), "verify_s": [round(t, 2) for t in times],
            "verify_median_s": round(statistics.median(times), 2), "target_s": 15.0}


def bench_hashing(work: Path, size_mib: int) -> dict:
    from builder.core.hashing import sha256_file, tree_files

    data = work / "blob"
    data.mkdir()
    chunk = os.urandom(1 << 20)
    files = 8
    for i in range(files):
        with open(data / f"part{i}.bin", "wb") as f:
            for _ in range(size_mib // files):
                f.write(chunk)
    paths = [data / p for p in tree_files(data)]
    ours, theirs = [], []
    for _ in range(3):  # alternate, so both see the same page-cache and machine state
        t0 = time.perf_counter()
        mine = [sha256_file(p) for p in paths]
        ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        res = subprocess.run(["sha256sum", *map(str, paths)], capture_output=True, text=True, check=True)
        theirs.append(time.perf_counter() - t0)
        assert [line.split()[0] for line in res.stdout.splitlines()] == mine
    o, t = min(ours), min(theirs)
    return {"bytes": size_mib << 20, "ours_s": round(o, 3), "sha256sum_s": round(t, 3),
            "ours_MiB_s": round(size_mib / o, 1), "sha256sum_MiB_s": round(size_mib / t, 1),
            "throughput_ratio": round(t / o, 3), "target_ratio": 0.9}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--only", choices=["verify", "hashing"])
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="tb-bench-") as tmp:
        work = Path(tmp)
        if args.only in (None, "hashing"):
            results["manifest_hashing"] = bench_hashing(work, args.size_mib)
            shutil.rmtree(work / "blob")
        if args.only in (None, "verify"):
            results["verify_examples"] = bench_verify(work)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
