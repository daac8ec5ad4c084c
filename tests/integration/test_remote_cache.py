"""A remote build cache on S3 (moto_server) shared by two 'runners' (two local caches)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.s3]


def _steps(r):
    return {(m["name"], s["kind"]): s for m in json.loads(r.stdout)["models"] for s in m["steps"]}


@pytest.mark.slow
def test_second_runner_pulls_what_the_first_built(cli, bucket, tmp_path, monkeypatch, in_root):
    url = f"s3://{bucket}/cache"
    monkeypatch.setenv("TRITONBUILD_CACHE_DIR", str(tmp_path / "runner-a"))
    first = cli(
        "build",
        "recipes/examples/text-encoder.yaml",
        "-o",
        tmp_path / "A",
        "--cache-url",
        url,
        "--json",
    )
    assert (
        first.exit_code == 0 and _steps(first)[("text-encoder", "onnx.export")]["status"] == "built"
    )
    monkeypatch.setenv("TRITONBUILD_CACHE_DIR", str(tmp_path / "runner-b"))
    second = cli(
        "build",
        "recipes/examples/text-encoder.yaml",
        "-o",
        tmp_path / "B",
        "--cache-url",
        url,
        "--json",
    )
    step = _steps(second)[("text-encoder", "onnx.export")]
    assert (step["status"], step["reason"]) == (
        "cached",
        "remote cache: same inputs, params and toolchain",
    )
    assert (tmp_path / "A" / "tritonbuild-manifest.json").read_bytes() == (
        tmp_path / "B" / "tritonbuild-manifest.json"
    ).read_bytes()
    m = json.loads(
        cli("plan", "recipes/examples/text-encoder.yaml", "--matrix", "--cache-url", url).stdout
    )
    assert m == {"include": []}  # nothing left to fan out


def test_unreachable_remote_cache_warns_once_and_builds(
    cli, py_recipe, tmp_path, s3env, monkeypatch
):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv(
        "TRITONBUILD_CACHE_DIR", str(tmp_path / "own-cache")
    )  # a miss: the remote is asked
    r = cli("build", py_recipe, "-o", tmp_path / "A", "--cache-url", "s3://nowhere/cache", "--json")
    assert r.exit_code == 0
    # NOTE: the build also warns that the recipe's declared goldens file is missing; count the cache's own.
    warnings = [w for w in json.loads(r.stdout)["warnings"] if "remote cache" in w]
    assert len(warnings) == 1 and "remote cache s3://nowhere/cache unavailable" in warnings[0]


def test_onnx_source_from_s3_pinned(cli, bucket, s3fs_client, tmp_path, in_root):
    from tritonbuild.core.hashing import sha256_file

    onnx = ROOT / "recipes" / "examples" / "scaler" / "model.onnx"
    s3fs_client.put_file(str(onnx), f"{bucket}/models/scaler.onnx")
    pin = sha256_file(onnx)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: scaler\nversion: 1\nbackend: onnxruntime\nsource: {{path: 's3://{bucket}/models/"
        f"scaler.onnx', sha256: {pin}}}\nmax_batch_size: 4\n"
    )
    r = cli("build", recipe, "-o", tmp_path / "OUT")
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "OUT" / "scaler" / "1" / "model.onnx").read_bytes() == onnx.read_bytes()
    recipe.write_text(recipe.read_text().replace(pin, "ab" * 32))
    bad = cli("build", recipe, "-o", tmp_path / "OUT2", "--cache-dir", tmp_path / "fresh")
    assert bad.exit_code == 5 and "does not match its sha256 pin" in bad.stderr
    unpinned = cli("validate", recipe)
    assert unpinned.exit_code == 0
    recipe.write_text(recipe.read_text().replace(f", sha256: {'ab' * 32}", ""))
    r = cli("build", recipe, "-o", tmp_path / "OUT3")
    assert r.exit_code == 4 and "is remote and not pinned" in r.stderr


def test_llm_checkpoint_from_s3_pinned(cli, bucket, s3fs_client, tmp_path, in_root):
    ckpt = ROOT / "recipes" / "examples" / "tiny-llama"
    s3fs_client.put(str(ckpt) + "/", f"{bucket}/ckpt/tiny-llama/", recursive=True)
    local = json.loads(cli("plan", "recipes/examples/tiny-llama-int4.yaml", "--json").stdout)[
        "models"
    ][0]
    from tritonbuild.backends.llm.checkpoint import tree_digest
    from tritonbuild.core.hashing import sha256_file, tree_files

    pin = tree_digest({rel.as_posix(): sha256_file(ckpt / rel) for rel in tree_files(ckpt)})
    text = (
        (ROOT / "recipes" / "examples" / "tiny-llama-int4.yaml")
        .read_text()
        .replace(
            "checkpoint: {path: tiny-llama}",
            f"checkpoint: {{path: 's3://{bucket}/ckpt/tiny-llama', sha256: {pin}}}",
        )
    )
    (tmp_path / "llm.yaml").write_text(text)
    r = cli("plan", tmp_path / "llm.yaml", "--json")
    assert r.exit_code == 0, r.stderr
    (m,) = json.loads(r.stdout)["models"]
    assert m["extras"]["memory_plan"]["kv_bytes_per_token"] == 256
    assert (
        m["steps"][0]["cache_key"] == local["steps"][0]["cache_key"]
    )  # same content, same engine key
    (tmp_path / "llm.yaml").write_text(text.replace(pin, "cd" * 32))
    bad = cli("plan", tmp_path / "llm.yaml")
    assert bad.exit_code == 4 and "the recipe pins cdcd" in bad.stderr
