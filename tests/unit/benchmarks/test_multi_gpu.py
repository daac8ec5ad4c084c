"""benchmarks/multi_gpu (issue 34, the two-GPU run): its recipes plan and build as the run needs them, the GPU
scorer's model serves in the real embedded tritonserver (on CPU instances here; the run puts them on GPU 0 and
GPU 1), its load script finds no difference where there is none, and summarize_mg.py reads a results directory."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

HERE = ROOT / "benchmarks" / "multi_gpu"
FIXTURE = Path(__file__).with_name("fixtures") / "multi-gpu"


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _work(tmp_path: Path) -> Path:
    """The run's work directory: the recipes beside checkpoints/llama-3-8b-fp16 (here the tiny Llama)."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "vllm"))
    try:
        import tiny_llama
    finally:
        sys.path.remove(str(ROOT / "benchmarks" / "vllm"))
    tiny_llama.write_all(tmp_path / "ck")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "llama-3-8b-fp16").symlink_to(tmp_path / "ck" / "tiny-llama-fp16")
    for recipe in [
        *HERE.glob("*.yaml"),
        *(ROOT / "benchmarks" / "vllm").glob("llama-3-8b-*-invariant.yaml"),
    ]:
        shutil.copy(recipe, tmp_path)
    shutil.copytree(HERE / "gpu_scorer", tmp_path / "gpu_scorer")
    return tmp_path


def _plans(cli, work: Path, *recipes: str) -> dict[str, dict]:
    r = cli("plan", *(work / name for name in recipes), "--json")
    assert r.exit_code == 0, r.stderr
    return {m["name"]: m["extras"]["memory_plan"] for m in json.loads(r.stdout)["models"]}


def test_tensor_parallel_2_halves_what_each_gpu_holds(cli, tmp_path, monkeypatch):
    work = _work(tmp_path)
    monkeypatch.chdir(work)
    tp2 = _plans(
        cli, work, "llama-3-8b-fp16-tp2-invariant.yaml", "llama-3-8b-int4-tp2-invariant.yaml"
    )
    tp1 = _plans(cli, work, "llama-3-8b-fp16-invariant.yaml", "llama-3-8b-int4-invariant.yaml")
    for q in ("fp16", "int4"):
        two, one = tp2[f"llama-3-8b-{q}-tp2-invariant"], tp1[f"llama-3-8b-{q}-invariant"]
        assert two["weight_bytes"] == one["weight_bytes"]
        assert two["weight_bytes_per_gpu"] == -(-one["weight_bytes"] // 2)
        assert two["kv_bytes_per_token_per_gpu"] * 2 == one["kv_bytes_per_token_per_gpu"]
        assert two["max_kv_tokens"] > one["max_kv_tokens"]


def test_the_int4_tp2_recipe_plans_the_quantize_step_it_shares_with_tp1(cli, tmp_path, monkeypatch):
    work = _work(tmp_path)
    monkeypatch.chdir(work)
    r = cli("plan", "llama-3-8b-int4-tp2-invariant.yaml")
    assert r.exit_code == 0 and "step=vllm.quantize" in r.stdout, r.stderr


def test_the_scorer_config_puts_two_instances_on_each_gpu(cli, tmp_path, monkeypatch):
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    work = _work(tmp_path)
    monkeypatch.chdir(work)
    r = cli("build", "gpu-scorer.yaml", "-o", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    config = text_format.Parse(
        (tmp_path / "out" / "gpu-scorer" / "config.pbtxt").read_text(),
        model_config_pb2.ModelConfig(),
    )
    groups = [(g.kind, list(g.gpus), g.count) for g in config.instance_group]
    gpu = model_config_pb2.ModelInstanceGroup.KIND_GPU
    assert groups == [(gpu, [0], 2), (gpu, [1], 2)]


@pytest.mark.triton
@pytest.mark.slow
def test_the_scorer_serves_and_the_load_finds_no_difference(cli, tmp_path, monkeypatch):
    """The scorer on four CPU instances of the real embedded server: verify (goldens recorded, repeats and batch
    composition) passes, each instance writes its row count, scorer_load.py compares every loaded row."""
    from tritonbuild.server.embedded import EmbeddedServer

    work = _work(tmp_path)
    monkeypatch.chdir(work)
    text = (work / "gpu-scorer.yaml").read_text().replace("target: gpu", "target: cpu")
    (work / "cpu-scorer.yaml").write_text(
        text.replace("kind: gpu, count: 2, gpus: [0]", "kind: cpu, count: 2").replace(
            "  - {kind: gpu, count: 2, gpus: [1]}\n", ""
        )
    )
    assert cli("build", "cpu-scorer.yaml", "-o", tmp_path / "out").exit_code == 0
    counts = tmp_path / "counts"
    counts.mkdir()
    monkeypatch.setenv("SCORER_COUNTS_DIR", str(counts))
    r = cli("verify", tmp_path / "out", "--record")
    assert r.exit_code == 0, r.stdout + r.stderr
    with EmbeddedServer(tmp_path / "out") as server:
        server.load("gpu-scorer")
        result = _module(HERE / "scorer_load.py").load(
            f"http://{server.http_url}", "gpu-scorer", 3, 4
        )
    assert result["requests"] > 0 and result["rows"] >= result["requests"]
    assert result["differing_rows"] == 0 and result["first_difference"] is None
    served = [json.loads(p.read_text()) for p in counts.glob("*.json")]
    assert served and all(s["kind"] == "CPU" and s["rows"] > 0 for s in served)
    assert sum(s["rows"] for s in served) >= result["rows"]


def test_the_record_reads_a_results_directory():
    record = _module(HERE / "summarize_mg.py").summarize(FIXTURE)
    assert record["machine"] == {"gpu": "NVIDIA H200", "gpus": 2} and record["vllm"] == "0.22.0"
    configs = {c["name"]: c for c in record["tensor_parallel"]["configs"]}
    fp16 = configs["llama-3-8b-fp16-tp2-invariant"]
    assert fp16["tensor_parallel_size"] == 2 and fp16["kv_tokens_vllm"] == 900000
    assert (
        fp16["plan_vs_vllm_pct"] == 1.0 and fp16["tok_s_1"] == 80.0 and fp16["ids_identical"] == 10
    )
    assert configs["llama-3-8b-int4-tp2-invariant"]["kernel"] == "TritonbuildInvariantW4A16Kernel"
    assert (
        configs["llama-3-8b-fp16-invariant"]["tok_s_1"] is None
    )  # the tp1 config did not run in the fixture
    assert record["tensor_parallel"]["verify"] == {"tp2": "PASS", "tp1": None}
    groups = record["instance_groups"]
    assert groups["rows_per_gpu"] == {"0": 300, "1": 200} and groups["gpus_serving"] == ["0", "1"]
    assert groups["peak_utilization_pct"] == {"0": 55, "1": 47} and groups["differing_rows"] == 0
    assert groups["verify"] == "FAIL"
    assert json.loads(json.dumps(record)) == record


def test_the_script_keeps_nvlink_multicast_off():
    text = (HERE / "h200x2.sh").read_text()
    for name in (
        "NCCL_NVLS_ENABLE=0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST=1",
        "NVSHMEM_DISABLE_NVLS=1",
    ):
        assert name in text
    assert os.access(HERE / "h200x2.sh", os.X_OK)
