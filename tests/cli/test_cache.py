"""The build cache: exact keys, rebuild reasons, corruption, races, gc, unwritable dirs, --changed-since."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import PY_MODEL
from tests.plugins.affine import AffineBackend, write_recipe
from tritonbuild.backends import REGISTRY


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITONBUILD_CACHE_DIR", str(tmp_path / "cache"))


def _steps(result) -> list[dict]:
    return [s for m in json.loads(result.stdout)["models"] for s in m["steps"]]


def test_rebuild_says_what_changed(cli, py_recipe, write, tmp_path):
    first = _steps(cli("build", py_recipe, "-o", tmp_path / "A", "--json"))[0]
    assert (first["status"], first["reason"]) == ("built", "first build (no cache entry)")
    again = _steps(cli("build", py_recipe, "-o", tmp_path / "A", "--json"))[0]
    assert (again["status"], again["reason"]) == ("cached", "same inputs, params and toolchain")
    write("model.py", PY_MODEL + "\n# edited\n")
    changed = _steps(cli("build", py_recipe, "-o", tmp_path / "A", "--json"))[0]
    assert (
        changed["status"] == "built" and changed["reason"] == "changed: params layout; input files"
    )


def test_toolchain_keys_are_per_step_kind():
    from tritonbuild.plan.planner import cache_key

    base = {"tritonbuild": "0.1.0", "torch": "2.13.0", "onnx": "1.23.2", "python": "3.11.7"}
    gpu = {**base, "gpu_sm": "9.0", "gpu_name": "NVIDIA H200", "tensorrt_llm": "1.2.1"}
    assert cache_key("python.package", {}, {}, base) == cache_key("python.package", {}, {}, gpu)
    assert cache_key("trtllm.engine", {}, {}, base) != cache_key("trtllm.engine", {}, {}, gpu)
    assert cache_key("onnx.export", {}, {}, base) != cache_key(
        "onnx.export", {}, {}, {**base, "torch": "2.14.0"}
    )
    assert cache_key("python.package", {}, {}, base) == cache_key(
        "python.package", {}, {}, {**base, "torch": "2.14.0"}
    )


@pytest.mark.parametrize("damage", ["truncate", "bitflip", "delete"])
def test_damaged_entry_is_detected_evicted_and_rebuilt(cli, py_recipe, tmp_path, damage):
    from tritonbuild.core.cas import Store, default_cache_dir

    cli("build", py_recipe, "-o", tmp_path / "A")
    store = Store(default_cache_dir())
    ((_key, record, _),) = [r for r in store.records() if r[1]["model"] == "doubler"]
    blob = store.blob_path(record["files"]["model.py"]["sha256"])
    os.chmod(blob, 0o644)
    data = blob.read_bytes()
    if damage == "truncate":
        blob.write_bytes(data[:10])
    elif damage == "bitflip":
        blob.write_bytes(bytes([data[0] ^ 1]) + data[1:])
    else:
        blob.unlink()
    step = _steps(cli("build", py_recipe, "-o", tmp_path / "A", "--json"))[0]
    assert step["status"] == "built" and step["reason"] == "cache entry missing or corrupt"
    assert (tmp_path / "A" / "doubler" / "1" / "model.py").read_bytes() == data
    assert store.blob_path(record["files"]["model.py"]["sha256"]).read_bytes() == data


def test_cache_verify_evicts_corrupt_blobs(cli, py_recipe, tmp_path):
    from tritonbuild.core.cas import Store, default_cache_dir

    cli("build", py_recipe, "-o", tmp_path / "A")
    store = Store(default_cache_dir())
    blob = store.blobs()[0]
    os.chmod(blob, 0o644)
    blob.write_bytes(b"rotten")
    r = json.loads(cli("cache", "verify", "--json").stdout)
    assert r["corrupt_blobs"] == [blob.name] and r["evicted_records"]
    assert json.loads(cli("cache", "verify", "--json").stdout)["corrupt_blobs"] == []


def test_gc_keeps_the_most_recently_used(cli, write, tmp_path):
    for i in range(3):
        write(f"m{i}/model.py", PY_MODEL + "#" * (1000 * (i + 1)) + "\n")
        write(
            f"m{i}/r.yaml",
            f"name: m{i}\nversion: 1\nbackend: python\nsource: {{path: model.py}}\n"
            "inputs: [{name: X, dtype: fp32, dims: [3]}]\n"
            "outputs: [{name: Y, dtype: fp32, dims: [3]}]\n",
        )
        cli("build", tmp_path / f"m{i}" / "r.yaml", "-o", tmp_path / f"O{i}")
    from tritonbuild.core.cas import Store, default_cache_dir

    store = Store(default_cache_dir())
    for i, (key, _rec, _) in enumerate(sorted(store.records(), key=lambda r: r[1]["model"])):
        os.utime(store.record_path(key), (1_000_000 + i, 1_000_000 + i))  # m0 oldest … m2 newest
    ls = json.loads(cli("cache", "ls", "--json").stdout)["entries"]
    assert sorted(e["model"] for e in ls) == ["m0", "m1", "m2"]
    newest = next(e for e in ls if e["model"] == "m2")
    r = json.loads(cli("cache", "gc", "--max-size", f"{newest['bytes'] + 10}B", "--json").stdout)
    assert len(r["evicted_records"]) == 2
    left = json.loads(cli("cache", "ls", "--json").stdout)["entries"]
    assert [e["model"] for e in left] == ["m2"]
    assert cli("cache", "gc", "--max-size", "lots").exit_code == 2


def test_gc_prunes_logs_memos_and_index_of_evicted_entries_and_reports_what_is_left(
    cli, py_recipe, tmp_path
):
    """gc left logs/, io/ and index/ behind and said 'kept 0 bytes' of a cache still holding them."""
    from tritonbuild.core.cas import Store, default_cache_dir

    cli("build", py_recipe, "-o", tmp_path / "A")
    store = Store(default_cache_dir())
    ((key, _record, _),) = store.records()
    # a step's logs and reproduce.sh go to logs/<key[:16]>/ (steps/run.py; a Python package step writes none)
    (store.root / "logs" / key[:16]).mkdir(parents=True)
    (store.root / "logs" / key[:16] / "reproduce.sh").write_text("#!/bin/sh\n")
    beside = {"logs": "logs/*", "io": "io/*/*.json", "index": "index/*/*.json"}
    assert all(list(store.root.glob(pattern)) for pattern in beside.values())
    r = json.loads(cli("cache", "gc", "--max-size", "0B", "--json").stdout)
    assert r["evicted_records"] and r["kept_records"] == 0
    assert {what: list(store.root.glob(pattern)) for what, pattern in beside.items()} == {
        "logs": [],
        "io": [],
        "index": [],
    }
    assert all(r["removed_bytes"][what] > 0 for what in ("blobs", "records", "logs", "io", "index"))
    assert r["freed_bytes"] == sum(r["removed_bytes"].values())
    on_disk = sum(f.stat().st_size for f in store.root.rglob("*") if f.is_file())
    assert r["kept_bytes"] == on_disk  # what is really left (the lock, the file-hash cache)
    text = cli("cache", "gc", "--max-size", "0B").stdout
    assert f"kept 0 entries, {on_disk} bytes in {store.root}" in text


def test_gc_keeps_what_belongs_to_kept_entries(cli, py_recipe, tmp_path):
    from tritonbuild.core.cas import Store, default_cache_dir

    cli("build", py_recipe, "-o", tmp_path / "A")
    store = Store(default_cache_dir())
    before = sorted(
        p.relative_to(store.root) for p in store.root.rglob("*.json") if "steps" not in p.parts
    )
    r = json.loads(cli("cache", "gc", "--max-size", "1G", "--json").stdout)
    assert (
        r["evicted_records"] == [] and r["removed_bytes"]["logs"] == r["removed_bytes"]["io"] == 0
    )
    assert (
        sorted(
            p.relative_to(store.root) for p in store.root.rglob("*.json") if "steps" not in p.parts
        )
        == before
    )
    step = _steps(cli("build", py_recipe, "-o", tmp_path / "A", "--json"))[0]
    assert step["status"] == "cached"


def test_unwritable_cache_dir_falls_back_with_a_warning(cli, py_recipe, tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "blobs").write_text("a file where a directory should be")  # unwritable even for root
    monkeypatch.setenv("TRITONBUILD_CACHE_DIR", str(ro / "blobs" / "cache"))
    r = cli("build", py_recipe, "-o", tmp_path / "A", "--json")
    assert r.exit_code == 0
    assert "is not writable" in json.loads(r.stdout)["warnings"][0]


@pytest.mark.slow
def test_two_builds_racing_on_one_cache(py_recipe, tmp_path):
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tritonbuild",
                "build",
                str(py_recipe),
                "-o",
                str(tmp_path / f"O{i}"),
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ},
        )
        for i in range(2)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    a, b = ((tmp_path / f"O{i}" / "tritonbuild-manifest.json").read_bytes() for i in range(2))
    assert a == b
    r = subprocess.run(
        [sys.executable, "-m", "tritonbuild", "cache", "verify", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ},
    )
    assert json.loads(r.stdout)["corrupt_blobs"] == []


def test_changed_since_builds_only_what_changed(cli, tmp_path, monkeypatch):
    repo = tmp_path / "proj"
    repo.mkdir()
    monkeypatch.chdir(repo)
    for name in ("a", "b"):
        (repo / name).mkdir()
        (repo / name / "model.py").write_text(PY_MODEL)
        (repo / f"{name}.yaml").write_text(
            f"name: {name}\nversion: 1\nbackend: python\n"
            f"source: {{path: {name}/model.py}}\n"
            "inputs: [{name: X, dtype: fp32, dims: [3]}]\n"
            "outputs: [{name: Y, dtype: fp32, dims: [3]}]\n"
        )
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    (repo / "b" / "model.py").write_text(PY_MODEL + "# changed\n")
    r = cli("build", "a.yaml", "b.yaml", "-o", "OUT", "--changed-since", "HEAD", "--json")
    assert r.exit_code == 0 and [m["name"] for m in json.loads(r.stdout)["models"]] == ["b"]
    m = json.loads(cli("plan", "a.yaml", "b.yaml", "--matrix", "--changed-since", "HEAD").stdout)
    assert [e["model"] for e in m["include"]] == [] or all(e["model"] == "b" for e in m["include"])
    bad = cli("build", "a.yaml", "-o", "OUT2", "--changed-since", "no-such-rev")
    assert bad.exit_code == 2 and "unknown revision" in bad.stderr and not (repo / "OUT2").exists()


def test_matrix_lists_only_uncached_recipes(cli, py_recipe, tmp_path):
    m = json.loads(cli("plan", py_recipe, "--matrix").stdout)
    assert m["include"] == [
        {
            "backend": "python",
            "gpu": "cpu",
            "model": "doubler",
            "recipe": str(py_recipe),
            "runner": "cpu",
            "steps": ["python.package"],
        }
    ]
    cli("build", py_recipe, "-o", tmp_path / "A")
    assert json.loads(cli("plan", py_recipe, "--matrix").stdout) == {"include": []}
    gl = json.loads(cli("plan", py_recipe, "--matrix", "gitlab").stdout)
    assert gl == {"parallel": {"matrix": []}}


@pytest.mark.slow
def test_large_artifacts_are_linked_not_copied(cli, write, tmp_path):
    big = os.urandom(65 << 20)
    write("model.py", PY_MODEL)
    write("weights.bin", big)
    p = write(
        "r.yaml",
        "name: big\nversion: 1\nbackend: python\nsource: {path: model.py, files: [weights.bin]}\n"
        "inputs: [{name: X, dtype: fp32, dims: [3]}]\noutputs: [{name: Y, dtype: fp32, dims: [3]}]\n",
    )
    assert cli("build", p, "-o", tmp_path / "A").exit_code == 0
    assert cli("build", p, "-o", tmp_path / "B").exit_code == 0
    a, b = (
        (tmp_path / "A" / "big" / "1" / "weights.bin"),
        (tmp_path / "B" / "big" / "1" / "weights.bin"),
    )
    assert (
        os.path.samefile(a, b) or a.stat().st_ino != b.stat().st_ino
    )  # hardlinked, or reflinked copies
    assert a.stat().st_mode & 0o222 == 0 or not os.path.samefile(
        a, b
    )  # a shared inode is read-only
    assert (
        tmp_path / "A" / "big" / "1" / "model.py"
    ).stat().st_nlink == 1  # small files are copies


class _CompiledAffine(AffineBackend):
    """The toy backend declaring its one step an engine (named like no other engine step)."""

    engine_steps = ("affine.render",)
    prebuilt_prefix = ""  # --engine DIR holds model.py itself


def test_engine_steps_are_declared_by_the_backend_not_named(cli, tmp_path):
    recipe = write_recipe(tmp_path)
    with REGISTRY.registered(_CompiledAffine()):
        (entry,) = json.loads(cli("plan", recipe, "--matrix").stdout)["include"]
        assert (entry["gpu"], entry["runner"], entry["steps"]) == ("gpu", "gpu", ["affine.render"])
        engine = tmp_path / "engine"
        engine.mkdir()
        (engine / "model.py").write_text("# built on a GPU runner\n")
        result = cli(
            "build", recipe, "-o", tmp_path / "out", "--engine", f"affine-demo={engine}", "--json"
        )
        assert result.exit_code == 0, result.stderr
        assert [(s["kind"], s["status"]) for s in _steps(result)] == [("affine.render", "prebuilt")]
        assert (
            tmp_path / "out" / "affine-demo" / "1" / "model.py"
        ).read_text() == "# built on a GPU runner\n"
    with REGISTRY.registered(AffineBackend()):  # the same step, not declared an engine
        assert json.loads(cli("plan", recipe, "--matrix").stdout)["include"][0]["gpu"] == "cpu"
        result = cli("build", recipe, "-o", tmp_path / "out2", "--engine", f"affine-demo={engine}")
        assert result.exit_code == 5 and "no engine-building recipe defines" in result.stderr
