"""tritonbuild benchmarks. One command: `python benchmarks/run.py [--size-mib 1024]`.

Prints ratios measured side by side in the same run (the machines are noisy):
- verify wall time of the bundled examples (embedded tritonserver start + load + goldens), target < 15 s;
- manifest hashing throughput ÷ `sha256sum` on the same files, target >= 0.9;
- publish to file:// of a repository holding a 1 GiB artifact ÷ `cp -r` of it;
- publish to an S3 endpoint (a local moto_server) ÷ s3fs `put(recursive=True)` of the same tree.
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


def _big_repository(work: Path, size_mib: int) -> Path:
    """A built repository whose Python model carries a size_mib weights file (random bytes)."""
    from builder import api

    src = work / "bigsrc"
    src.mkdir()
    (src / "model.py").write_text("class TritonPythonModel:\n    def execute(self, requests):\n        return []\n")
    with open(src / "weights.bin", "wb") as f:
        for _ in range(size_mib):
            f.write(os.urandom(1 << 20))
    (src / "big.yaml").write_text("name: big\nversion: 1\nbackend: python\nsource: {path: model.py, files: "
                                  "[weights.bin]}\ninputs: [{name: X, dtype: fp32, dims: [1]}]\n"
                                  "outputs: [{name: Y, dtype: fp32, dims: [1]}]\n")
    os.environ["TRITONBUILD_CACHE_DIR"] = str(work / "bigcache")
    out = work / "bigrepo"
    api.build_repository([src / "big.yaml"], out)
    (src / "weights.bin").unlink()
    shutil.rmtree(work / "bigcache")
    return out


def bench_publish_file(work: Path, repo: Path) -> dict:
    from builder import api

    ours, theirs = [], []
    for i in range(4):  # alternate which goes first: same page cache, same machine state
        runs = [("cp", lambda: subprocess.run(["cp", "-r", str(repo), str(work / f"cp{i}")], check=True)),
                ("ours", lambda: api.publish(repo, f"file://{work}/pub{i}", skip_verify=True))]
        for name, fn in (runs if i % 2 == 0 else runs[::-1]):
            os.sync()  # start each copy with no dirty pages of the other's writeback pending
            t0 = time.perf_counter()
            fn()
            (theirs if name == "cp" else ours).append(time.perf_counter() - t0)
        shutil.rmtree(work / f"cp{i}")
        shutil.rmtree(work / f"pub{i}")
    o, t = min(ours), min(theirs)
    return {"publish_s": round(o, 3), "cp_r_s": round(t, 3), "time_ratio_publish_over_cp": round(o / t, 3)}


def bench_publish_s3(work: Path, repo: Path) -> dict | str:
    import socket

    moto = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
    if not Path(moto).exists():
        return "skipped: moto_server is not installed"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        endpoint = f"http://127.0.0.1:{port}"
        os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
                          AWS_ENDPOINT_URL=endpoint)
        import s3fs

        from builder import api

        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint}, skip_instance_cache=True)
        fs.mkdir("bench")
        ours, theirs = [], []
        for i in range(4):  # alternate which goes first
            runs = [("s3fs", lambda: fs.put(str(repo), f"bench/s3fs{i}", recursive=True)),
                    ("ours", lambda: api.publish(repo, f"s3://bench/ours{i}", skip_verify=True))]
            for name, fn in (runs if i % 2 == 0 else runs[::-1]):
                t0 = time.perf_counter()
                fn()
                (theirs if name == "s3fs" else ours).append(time.perf_counter() - t0)
            fs.rm(f"bench/s3fs{i}", recursive=True)
            fs.rm(f"bench/ours{i}", recursive=True)
        o, t = min(ours), min(theirs)
        return {"publish_s": round(o, 3), "s3fs_put_recursive_s": round(t, 3),
                "time_ratio_publish_over_s3fs": round(o / t, 3)}
    finally:
        proc.terminate()
        proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--s3-size-mib", type=int, default=256, help="Artifact size for the S3 publish benchmark.")
    ap.add_argument("--only", choices=["verify", "hashing", "publish"])
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="tb-bench-") as tmp:
        work = Path(tmp)
        if args.only in (None, "hashing"):
            results["manifest_hashing"] = bench_hashing(work, args.size_mib)
            shutil.rmtree(work / "blob")
        if args.only in (None, "verify"):
            results["verify_examples"] = bench_verify(work)
        if args.only in (None, "publish"):
            (work / "file").mkdir()
            repo = _big_repository(work / "file", args.size_mib)
            results["publish_file"] = {"artifact_MiB": args.size_mib, **bench_publish_file(work / "file", repo)}
            shutil.rmtree(work / "file")
            (work / "s3").mkdir()
            repo = _big_repository(work / "s3", args.s3_size_mib)
            res = bench_publish_s3(work / "s3", repo)
            results["publish_s3"] = {"artifact_MiB": args.s3_size_mib, **res} if isinstance(res, dict) else res
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
