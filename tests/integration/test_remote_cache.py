"""A remote build cache on S3 (moto_server) shared by two 'runners' (two local caches)."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.s3]


def _steps(r):
    return {(m["name"], s["kind"]): s for m in json.loads(r.stdout)["models"] for s in m["steps"]}


@pytest.mark.slow
def test_second_runner_pulls_what_the_first_built(cli, bucket, tmp_path, monkeypatch, in_root):
    url = f"s3://{bucket}/cache"
    monkeypatch.setenv("TRITONBUILD_CACHE_DIR", str(tmp_path / "runner-a"))
    first = cli("build", "recipes/examples/text-encoder.yaml", "-o", tmp_path / "A", "--cache-url", url, "--json")
    assert first.exit_code == 0 and _steps(first)[("text-encoder", "onnx.export")]["status"] == "built"
    monkeypatch.setenv("TRITONBUILD_CACHE_DIR", str(tmp_path / "runner-b"))
    second = cli("build", "recipes/examples/text-encoder.yaml", "-o", tmp_path / "B", "--cache-url", url, "--json")
    step = _steps(second)[("text-encoder", "onnx.export")]
    assert (step["status"], step["reason"]) == ("cached", "remote cache: same inputs, params and toolchain")
    assert (tmp_path / "A" / "tritonbuild-manifest.json").read_bytes() == \
        (tmp_path / "B" / "tritonbuild-manifest.json").read_bytes()
    m = json.loads(cli("plan", "recipes/examples/text-encoder.yaml", "--matrix", "--cache-url", url).stdout)
    assert m == {"include": []}  # nothing left to fan out


def test_unreachable_remote_cache_warns_once_and_builds(cli, py_recipe, tmp_path, s3env, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    r = cli("build", py_recipe, "-o", tmp_path / "A", "--cache-url", "s3://nowhere/cache", "--json")
    assert r.exit_code == 0
    warnings = json.loads(r.stdout)["warnings"]
    assert len(warnings) == 1 and "remote cache s3://nowhere/cache unavailable" in warnings[0]
