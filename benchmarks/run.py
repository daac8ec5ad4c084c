"""tritonbuild benchmarks. One command: `python benchmarks/run.py [--size-mib 1024]`.

Prints ratios measured side by side in the same run (the machines are noisy):
- verify wall time of the bundled examples (embedded tritonserver start + load + goldens), target < 15 s;
- manifest hashing throughput ÷ `sha256sum` on the same files, target >= 0.9;
- publish to file:// of a repository holding a 1 GiB artifact ÷ `cp -r` of it;
- publish to an S3 endpoint (a local moto_server) ÷ s3fs `put(recursive=True)` of the same tree;
- publish of an already-published repository, unchanged ÷ hashing it once (the file-hash cache makes the
  check a stat per file), and with one large file touched ÷ hashing that file once, target <= 1.2;
- no-op rebuild of 50 recipes (ONNX exports) ÷ their full build, target <= 1 % and < 1 s;
- no-op rebuild of the bundled examples through the CLI (a fresh process, as a user runs it) ÷ their full
  build, target < 1 s and <= 10 %, and which of torch/onnx/onnxruntime it imported (target: none);
- assembling a repository holding a 4 GiB artifact from the cache ÷ `cp` of that artifact, target <= 0.05;
- a cache hit from the remote cache (moto S3) ÷ rebuilding an ONNX export step;
- choosing the embedded server's interpreter on Python 3.13, as a verify's two server starts do, with the
  interpreters' answers kept (<envs>/interpreters.json) ÷ every candidate run (`--only interpreters`);
- portable numerics ÷ native speed (benchmarks/numerics.py: the torch examples, a 4096-wide fp32 MLP at batch 1
  and 64, interleaved rounds, median and range), target >= 0.8 (`--only numerics`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


@contextmanager
def moto_endpoint():
    """A local moto_server on a free port with fake credentials in the env; None when moto is missing."""
    import socket

    from tritonbuild.server.ports import free_port

    moto = Path(sys.executable).parent / "moto_server"
    if not moto.exists():
        yield None
        return
    port = free_port()
    proc = subprocess.Popen(
        [str(moto), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        endpoint = f"http://127.0.0.1:{port}"
        os.environ.update(
            AWS_ACCESS_KEY_ID="bench",
            AWS_SECRET_ACCESS_KEY="bench",
            AWS_DEFAULT_REGION="us-east-1",
            AWS_ENDPOINT_URL=endpoint,
        )
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait()


def bench_verify(work: Path) -> dict:
    """`tritonbuild verify` of the built examples as a user runs it (a process of its own): wall, the CPU seconds of
    it and of what it started (tritonserver, its stubs, the in-process worker), and whether verify's own process
    imported torch (target: no; it cost ~2 CPU s a verify until 2026-12-08, the worker runs the torch models)."""
    from tritonbuild import api

    os.chdir(ROOT)
    os.environ["TRITONBUILD_CACHE_DIR"] = str(work / "cache")
    out = work / "examples"
    t0 = time.perf_counter()
    api.build_repository([ROOT / "recipes" / "examples"], out)
    build_s = time.perf_counter() - t0
    times, cpu, imported_torch = [], [], []
    for _ in range(3):
        before = os.times()
        t0 = time.perf_counter()
        done = subprocess.run(
            # -X importtime: verify's own imports on its stderr (its worker and the server's stubs are not told)
            [sys.executable, "-X", "importtime", "-m", "tritonbuild", "verify", str(out), "-q"],
            capture_output=True,
            text=True,
        )
        times.append(time.perf_counter() - t0)
        after = os.times()
        assert done.returncode == 0, done.stdout + done.stderr[-3000:]
        cpu.append(
            after.children_user
            + after.children_system
            - before.children_user
            - before.children_system
        )
        imported_torch.append(
            any(re.search(r"\|\s+torch$", line) for line in done.stderr.splitlines())
        )
    return {
        "build_cold_s": round(build_s, 2),
        "verify_s": [round(t, 2) for t in times],
        "verify_median_s": round(statistics.median(times), 2),
        "verify_cpu_s": [round(c, 2) for c in cpu],
        "verify_process_imported_torch": imported_torch,
        "target_s": 15.0,
    }


def bench_hashing(work: Path, size_mib: int) -> dict:
    from tritonbuild.core.hashing import sha256_file, tree_files

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
        res = subprocess.run(
            ["sha256sum", *map(str, paths)], capture_output=True, text=True, check=True
        )
        theirs.append(time.perf_counter() - t0)
        assert [line.split()[0] for line in res.stdout.splitlines()] == mine
    o, t = min(ours), min(theirs)
    return {
        "bytes": size_mib << 20,
        "ours_s": round(o, 3),
        "sha256sum_s": round(t, 3),
        "ours_MiB_s": round(size_mib / o, 1),
        "sha256sum_MiB_s": round(size_mib / t, 1),
        "throughput_ratio": round(t / o, 3),
        "target_ratio": 0.9,
    }


def _big_repository(work: Path, size_mib: int, keep_source: bool = False) -> Path:
    """A built repository whose Python model carries a size_mib weights file (random bytes)."""
    from tritonbuild import api

    src = work / "bigsrc"
    src.mkdir()
    (src / "model.py").write_text(
        "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"
    )
    with open(src / "weights.bin", "wb") as f:
        for _ in range(size_mib):
            f.write(os.urandom(1 << 20))
    (src / "big.yaml").write_text(
        "name: big\nversion: 1\nbackend: python\nsource: {path: model.py, files: "
        "[weights.bin]}\ninputs: [{name: X, dtype: fp32, dims: [1]}]\n"
        "outputs: [{name: Y, dtype: fp32, dims: [1]}]\n"
    )
    os.environ["TRITONBUILD_CACHE_DIR"] = str(work / "bigcache")
    out = work / "bigrepo"
    api.build_repository([src / "big.yaml"], out)
    if not keep_source:
        (src / "weights.bin").unlink()
        shutil.rmtree(work / "bigcache")
    return out


def bench_publish_file(work: Path, repo: Path) -> dict:
    from tritonbuild import api

    ours, theirs = [], []
    for i in range(4):  # alternate which goes first: same page cache, same machine state
        runs = [
            (
                "cp",
                lambda i=i: subprocess.run(
                    ["cp", "-r", str(repo), str(work / f"cp{i}")], check=True
                ),
            ),
            ("ours", lambda i=i: api.publish(repo, f"file://{work}/pub{i}", skip_verify=True)),
        ]
        for name, fn in runs if i % 2 == 0 else runs[::-1]:
            os.sync()  # start each copy with no dirty pages of the other's writeback pending
            t0 = time.perf_counter()
            fn()
            (theirs if name == "cp" else ours).append(time.perf_counter() - t0)
        shutil.rmtree(work / f"cp{i}")
        shutil.rmtree(work / f"pub{i}")
    o, t = min(ours), min(theirs)
    return {
        "publish_s": round(o, 3),
        "cp_r_s": round(t, 3),
        "time_ratio_publish_over_cp": round(o / t, 3),
    }


def bench_publish_unchanged(work: Path, repo: Path) -> dict:
    """Publish cost once a repository was published: again unchanged (every file's check a stat through the
    file-hash cache) ÷ hashing the repository once, and again after one large file was touched (its ctime moved:
    read again) ÷ hashing that file once."""
    from tritonbuild import api
    from tritonbuild.core.hashing import sha256_file

    files = [p for p in repo.rglob("*") if p.is_file()]
    big = max(files, key=lambda p: p.stat().st_size)

    def timed(fn) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    target = f"file://{work}/pub"
    first = timed(lambda: api.publish(repo, target, skip_verify=True))
    os.sync()  # the first publish's copy written back: the runs below compete with no writeback
    hash_all = min(timed(lambda: [sha256_file(p) for p in files]) for _ in range(2))
    unchanged = min(timed(lambda: api.publish(repo, target, skip_verify=True)) for _ in range(3))
    touched, hash_big = [], []
    for _ in range(3):  # alternating, so both see the same page cache
        os.utime(
            big
        )  # same bytes, new ctime: the cache cannot vouch for it, the check reads it again
        touched.append(timed(lambda: api.publish(repo, target, skip_verify=True)))
        hash_big.append(timed(lambda: sha256_file(big)))
    hash_big = min(hash_big)
    return {
        "repository_bytes": sum(p.stat().st_size for p in files),
        "hash_repository_s": round(hash_all, 3),
        "publish_first_s": round(first, 3),
        "publish_unchanged_s": round(unchanged, 3),
        "ratio_unchanged_over_hashing": round(unchanged / hash_all, 4),
        "hash_changed_file_s": round(hash_big, 3),
        "publish_one_file_changed_s": round(min(touched), 3),
        "ratio_one_changed_over_hashing_it": round(min(touched) / hash_big, 3),
        "target_ratio": 1.2,
    }


def bench_publish_s3(work: Path, repo: Path) -> dict | str:
    with moto_endpoint() as endpoint:
        if endpoint is None:
            return "skipped: moto_server is not installed"
        import s3fs

        from tritonbuild import api

        fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint}, skip_instance_cache=True)
        fs.mkdir("bench")
        ours, theirs = [], []
        for i in range(4):  # alternate which goes first
            runs = [
                ("s3fs", lambda i=i: fs.put(str(repo), f"bench/s3fs{i}", recursive=True)),
                ("ours", lambda i=i: api.publish(repo, f"s3://bench/ours{i}", skip_verify=True)),
            ]
            for name, fn in runs if i % 2 == 0 else runs[::-1]:
                t0 = time.perf_counter()
                fn()
                (theirs if name == "s3fs" else ours).append(time.perf_counter() - t0)
            fs.rm(f"bench/s3fs{i}", recursive=True)
            fs.rm(f"bench/ours{i}", recursive=True)
        o, t = min(ours), min(theirs)
        return {
            "publish_s": round(o, 3),
            "s3fs_put_recursive_s": round(t, 3),
            "time_ratio_publish_over_s3fs": round(o / t, 3),
        }


ENCODER = """
import torch


def build_model():
    return torch.nn.Sequential(torch.nn.Embedding(100, 8), torch.nn.Flatten(), torch.nn.Linear(32, 4))
"""


def _onnx_recipes(src: Path, n: int) -> list[Path]:
    src.mkdir(parents=True)
    (src / "enc.py").write_text(ENCODER)
    paths = []
    for i in range(n):
        p = src / f"m{i:02d}.yaml"
        p.write_text(
            f"name: m{i:02d}\nversion: 1\nbackend: onnxruntime\nsource:\n  export:\n"
            f"    module: 'enc:build_model'\n    inputs: {{ids: {{dtype: int64, shape: [2, 4]}}}}\n"
            f"    seed: {i}\nmax_batch_size: 8\n"
        )
        paths.append(p)
    return paths


def bench_noop_rebuild(work: Path, n: int) -> dict:
    from tritonbuild import api

    os.environ["TRITONBUILD_CACHE_DIR"] = str(work / "cache")
    recipes = _onnx_recipes(work / "src", n)
    t0 = time.perf_counter()
    api.build_repository([work / "src"], work / "out")
    full = time.perf_counter() - t0
    noop_inproc = []
    for _ in range(3):
        t0 = time.perf_counter()
        result, _ = api.build_repository([work / "src"], work / "out")
        noop_inproc.append(time.perf_counter() - t0)
        assert all(s.status == "cached" for m in result.models for s in m.steps)
    t0 = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "tritonbuild",
            "build",
            str(work / "src"),
            "-o",
            str(work / "out"),
            "--json",
        ],
        check=True,
        capture_output=True,
    )
    noop_cli = time.perf_counter() - t0
    best = min(noop_inproc)
    return {
        "recipes": len(recipes),
        "full_build_s": round(full, 2),
        "noop_rebuild_s": round(best, 3),
        "noop_rebuild_cli_s": round(noop_cli, 3),
        "ratio": round(best / full, 4),
        "target_ratio": 0.01,
        "target_s": 1.0,
    }


def bench_assemble_big(work: Path, size_mib: int) -> dict:
    from tritonbuild import api
    from tritonbuild.core.cas import Store
    from tritonbuild.repository.assemble import assemble
    from tritonbuild.steps import build

    repo = _big_repository(
        work, size_mib, keep_source=True
    )  # built once: the artifact is now in the cache
    artifact = work / "bigsrc" / "weights.bin"
    result = build(
        api.plan([work / "bigsrc" / "big.yaml"]), Store(work / "bigcache")
    )  # every step cached
    assert all(s.status == "cached" for m in result.models for s in m.steps)
    shutil.rmtree(repo)
    ours, theirs = [], []
    for i in range(3):
        os.sync()
        t0 = time.perf_counter()
        assemble(result, work / f"assembled{i}")
        ours.append(time.perf_counter() - t0)
        os.sync()
        t0 = time.perf_counter()
        subprocess.run(["cp", str(artifact), str(work / f"copy{i}.bin")], check=True)
        theirs.append(time.perf_counter() - t0)
        shutil.rmtree(work / f"assembled{i}")
        (work / f"copy{i}.bin").unlink()
    o, t = min(ours), min(theirs)
    return {
        "artifact_MiB": size_mib,
        "assemble_s": round(o, 4),
        "cp_s": round(t, 3),
        "ratio": round(o / t, 4),
        "target_ratio": 0.05,
    }


def bench_remote_cache(work: Path) -> dict | str:
    with moto_endpoint() as endpoint:
        if endpoint is None:
            return "skipped: moto_server is not installed"
        import s3fs

        from tritonbuild import api

        s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint}).mkdir("cache")
        recipe = ROOT / "recipes" / "examples" / "text-encoder.yaml"
        os.chdir(ROOT)
        os.environ["TRITONBUILD_CACHE_DIR"] = str(work / "runner-a")
        t0 = time.perf_counter()
        api.build_repository([recipe], work / "a", cache_url="s3://cache/tb")
        rebuild = time.perf_counter() - t0  # builds the export, then pushes it
        os.environ["TRITONBUILD_CACHE_DIR"] = str(work / "runner-b")
        t0 = time.perf_counter()
        result, _ = api.build_repository([recipe], work / "b", cache_url="s3://cache/tb")
        hit = time.perf_counter() - t0
        assert result.models[0].steps[0].reason.startswith("remote cache")
        return {
            "rebuild_s": round(rebuild, 2),
            "remote_hit_s": round(hit, 3),
            "ratio": round(hit / rebuild, 3),
        }


# Runs the CLI in a fresh interpreter and says on stderr which heavy modules it imported.
CLI_WITH_IMPORTS = (
    "import atexit, sys; atexit.register(lambda: print('HEAVY', sorted(m for m in ('torch', 'onnx', "
    "'onnxruntime') if m in sys.modules), file=sys.stderr)); "
    "from tritonbuild.cli import main; sys.argv[0] = 'tritonbuild'; main()"
)


def _cli(args: list[str], env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-c", CLI_WITH_IMPORTS, *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"tritonbuild {' '.join(args)} failed:\n{res.stderr}")
    heavy = [ln for ln in res.stderr.splitlines() if ln.startswith("HEAVY")][-1]
    return wall, heavy.removeprefix("HEAVY ")


def bench_noop_examples(work: Path) -> dict:
    env = {**os.environ, "TRITONBUILD_CACHE_DIR": str(work / "cache")}
    env.pop("VIRTUAL_ENV", None)
    args = ["build", "recipes/examples", "-o", str(work / "out"), "--json"]
    full, full_heavy = _cli(args, env)
    runs = [_cli(args, env) for _ in range(3)]
    best = min(w for w, _ in runs)
    return {
        "full_build_s": round(full, 2),
        "noop_rebuild_s": round(best, 3),
        "ratio": round(best / full, 4),
        "noop_imported": runs[0][1],
        "full_build_imported": full_heavy,
        "target_s": 1.0,
        "target_ratio": 0.1,
        "passed": best < 1.0 and best / full <= 0.1 and runs[0][1] == "[]",
    }


# A verify's two server starts, as far as choosing the embedded server's interpreter (toolenv.find each); ms.
INTERPRETER_CHOICE = (
    "import time; from tritonbuild.server import toolenv; t0 = time.perf_counter(); "
    "toolenv.find(); toolenv.find(); print(round((time.perf_counter() - t0) * 1000, 1))"
)


def bench_interpreter_choice(work: Path, rounds: int = 9) -> dict | str:
    """In fresh Python 3.13 processes (numpy < 2 has no wheel there: the candidates are probed), the answers kept
    ÷ dropped before each run; alternating which goes first. PATH as it is (pyenv shims, which are scripts, run
    every time), then without pyenv's shims (binaries only, as with a python3.12 from the OS)."""
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = sorted(pyenv.glob("versions/3.13.*/bin/python")) or [shutil.which("python3.13")]
    if found[-1] is None:
        return "skipped: no Python 3.13 here"
    (work / "path").mkdir()
    (work / "path" / "tritonbuild").symlink_to(
        ROOT / "builder"
    )  # toolenv needs the standard library only
    shims = str(pyenv / "shims")
    results = {}
    for name, path in (
        ("path_as_is", os.environ["PATH"]),
        (
            "without_pyenv_shims",
            os.pathsep.join(
                p for p in os.environ["PATH"].split(os.pathsep) if p.rstrip("/") != shims
            ),
        ),
    ):
        env = {
            **os.environ,
            "PYTHONPATH": str(work / "path"),
            "TRITONBUILD_ENVS_DIR": str(work / name),
            "PATH": path,
        }
        env.pop("TRITONBUILD_EMBEDDED_PYTHON", None)

        def once(drop: bool, env=env, name=name) -> float:
            if drop:
                (work / name / "interpreters.json").unlink(missing_ok=True)
            return float(
                subprocess.run(
                    [str(found[-1]), "-c", INTERPRETER_CHOICE],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            )

        once(False)
        dropped, kept = [], []
        for i in range(rounds):
            for drop in (True, False) if i % 2 == 0 else (False, True):
                (dropped if drop else kept).append(once(drop))
        results[name] = {
            "probing_ms": statistics.median(dropped),
            "kept_ms": statistics.median(kept),
            "probing_range_ms": [min(dropped), max(dropped)],
            "kept_range_ms": [min(kept), max(kept)],
            "ratio_kept_over_probing": round(
                statistics.median(kept) / statistics.median(dropped), 3
            ),
        }
    return {"python": str(found[-1]), "rounds": rounds, **results}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument(
        "--s3-size-mib", type=int, default=256, help="Artifact size for the S3 publish benchmark."
    )
    ap.add_argument(
        "--only",
        choices=[
            "verify",
            "hashing",
            "publish",
            "publish-unchanged",
            "cache",
            "noop",
            "interpreters",
            "numerics",
        ],
    )
    ap.add_argument(
        "--recipes", type=int, default=50, help="Recipes in the no-op rebuild benchmark."
    )
    ap.add_argument(
        "--big-mib", type=int, default=4096, help="Artifact size in the assemble benchmark."
    )
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
            results["publish_file"] = {
                "artifact_MiB": args.size_mib,
                **bench_publish_file(work / "file", repo),
            }
            results["publish_unchanged"] = bench_publish_unchanged(work / "file", repo)
            shutil.rmtree(work / "file")
            (work / "s3").mkdir()
            repo = _big_repository(work / "s3", args.s3_size_mib)
            res = bench_publish_s3(work / "s3", repo)
            results["publish_s3"] = (
                {"artifact_MiB": args.s3_size_mib, **res} if isinstance(res, dict) else res
            )
            shutil.rmtree(work / "s3")
        if args.only == "publish-unchanged":
            (work / "file").mkdir()
            repo = _big_repository(work / "file", args.size_mib)
            results["publish_unchanged"] = bench_publish_unchanged(work / "file", repo)
            shutil.rmtree(work / "file")
        if args.only in (None, "numerics"):
            from benchmarks.numerics import bench_numerics

            results["numerics_portable_vs_native"] = bench_numerics()
        if args.only in (None, "interpreters"):
            (work / "interpreters").mkdir()
            results["interpreter_choice_py313"] = bench_interpreter_choice(work / "interpreters")
        if args.only in (None, "noop"):
            (work / "examples").mkdir()
            results["noop_rebuild_examples"] = bench_noop_examples(work / "examples")
            shutil.rmtree(work / "examples")
        if args.only in (None, "cache"):
            for name in ("noop", "big", "remote"):
                (work / name).mkdir()
            results["noop_rebuild"] = bench_noop_rebuild(work / "noop", args.recipes)
            shutil.rmtree(work / "noop")
            results["assemble_from_cache"] = bench_assemble_big(work / "big", args.big_mib)
            shutil.rmtree(work / "big")
            results["remote_cache_hit"] = bench_remote_cache(work / "remote")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
