"""benchmarks/vllm/invariance_speed.py (issue 45's record) on a fixture results directory and kernel record, and
benchmarks/vllm/w4a16_default.py's call of vLLM's Machete operations (the GPU runs them; here, what it passes)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = Path(__file__).with_name("fixtures") / "llm-8b"


def _module(name: str):
    sys.path.insert(0, str(ROOT / "benchmarks" / "vllm"))
    try:
        spec = importlib.util.spec_from_file_location(
            name, ROOT / "benchmarks" / "vllm" / f"{name}.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.pop(0)


def _throughput(model: str, one: float, sixty_four: float) -> str:
    rows = [{"streams": 1, "tokens_per_s": one}, {"streams": 64, "tokens_per_s": sixty_four}]
    return json.dumps({"model": model, "rows": rows}) + "\n"


def _kernel_record(path: Path, fraction: float, checks: dict) -> Path:
    row = {"int4_invariant_ms": 2.0, "fp16_cublas_ms": 5.0, "int4_default_ms": None}
    record = {
        "date": "2026-12-06",
        "machine": {"gpu": "NVIDIA H100 80GB HBM3"},
        "kernel": {
            "1": row | {"bandwidth_fraction": fraction, "int4_default_skipped": "not driven"},
            "64": {"int4_invariant_ms": 4.0, "fp16_cublas_ms": 5.0, "bandwidth_fraction": 0.25},
        },
        "invariance_checks": checks,
    }
    path.write_text(json.dumps(record))
    return path


@pytest.fixture
def results(tmp_path):
    out = tmp_path / "results"
    shutil.copytree(FIXTURE, out)
    # three rounds per model, in the order h200_8b.sh's steps append them
    (out / "throughput-8b.jsonl").write_text(
        "".join(
            _throughput("llama-3-8b-int4", one, 9000.0 + one)
            + _throughput("llama-3-8b-int4-invariant", one * 1.2, 8000.0)
            + _throughput("llama-3-8b-fp16", 150.0, 7800.0)
            + _throughput("llama-3-8b-fp16-invariant", 60.0, 4800.0)
            for one in (250.0, 240.0, 260.0)
        )
    )
    return out


def test_rounds_give_median_and_range_and_the_ratio_is_of_medians(results, tmp_path):
    kernel = _kernel_record(tmp_path / "k.json", 0.61, {"qkv_rows_vs_alone": True})
    record = _module("invariance_speed").record(results, kernel)
    by_name = {c["name"]: c for c in record["end_to_end"]}
    int4 = by_name["llama-3-8b-int4"]
    assert int4["rounds"] == 3
    assert int4["tok_s_1"] == {"median": 250.0, "min": 240.0, "max": 260.0}
    assert int4["kernel"] == "MacheteLinearKernel"
    assert by_name["llama-3-8b-int4-invariant"]["tok_s_1"]["median"] == pytest.approx(300.0)
    ratio = record["invariant_over_default"]
    assert ratio["int4-w4a16"]["tok_s_1"] == pytest.approx(1.2)
    assert ratio["int4-w4a16"]["tok_s_64"] == pytest.approx(8000.0 / 9250.0)
    assert ratio["fp16"]["tok_s_1"] == pytest.approx(0.4)
    met = {t["what"]: t["met"] for t in record["targets"]}
    assert met == {
        "kernel: bandwidth fraction at 1 row": True,
        "kernel: cuBLAS fp16 ms / invariant INT4 ms at 64 rows": True,
        "INT4 invariant / default tok/s, 1 stream": True,
        "INT4 invariant / default tok/s, 64 streams": False,  # 0.86
        "fp16 invariant / default tok/s, 1 stream": False,
        "fp16 invariant / default tok/s, 64 streams": False,
        "every invariance check passing": True,
        "answers equal the committed goldens (verify --server, every invariant model)": True,
    }
    assert record["machine"]["gpu"] == "NVIDIA H200" and record["machine"]["kernel_gpu"].startswith(
        "NVIDIA H100"
    )
    assert json.loads(json.dumps(record)) == record


def test_every_check_of_the_run_is_named_and_one_failure_fails_the_target(results, tmp_path):
    kernel = _kernel_record(
        tmp_path / "k.json", 0.5, {"qkv_rows_vs_alone": True, "o_graphs": False}
    )
    record = _module("invariance_speed").record(results, kernel)
    checks = record["invariance_checks"]
    assert checks["kernel_o_graphs"] is False and checks["kernel_qkv_rows_vs_alone"] is True
    for model in ("llama-3-8b-fp16-invariant", "llama-3-8b-int4-invariant"):
        assert checks[f"{model}_alone_identical"] and checks[f"{model}_under_load_identical"]
        assert checks[f"{model}_verify_server_under_load"] and checks[f"{model}_soak"]
    assert not any(
        name.startswith("llama-3-8b-int4_") for name in checks
    )  # default configs are not checks
    met = {t["what"]: t["met"] for t in record["targets"]}
    assert not met["every invariance check passing"]
    assert not met["kernel: bandwidth fraction at 1 row"]


def test_verify_under_load_and_the_goldens_are_told_apart_over_every_report(results, tmp_path):
    """2026-12-07, an H100: verify --server --record refused the fp16 invariant model's answers (they differ from
    the goldens committed from another H100 run) while they were bit-identical alone and amid 63 others; the
    record called the model's verify failed, as if batch invariance had. A second report (the step run again,
    the earlier one kept under another name) counts too."""
    report = json.loads((results / "verify-8b-invariant.json").read_text())
    fp16 = next(m for m in report["models"] if m["name"] == "llama-3-8b-fp16-invariant")
    fp16 |= {"passed": False, "goldens_refused": "recorded goldens differ from the committed ones"}
    (results / "verify-8b-invariant-first.json").write_text(json.dumps(report))
    record = _module("invariance_speed").record(
        results, _kernel_record(tmp_path / "k.json", 0.6, {})
    )
    assert record["goldens_reproduced"] == {
        "llama-3-8b-fp16-invariant": False,
        "llama-3-8b-int4-invariant": True,
    }
    assert record["invariance_checks"]["llama-3-8b-fp16-invariant_verify_server_under_load"]
    met = {t["what"]: t["met"] for t in record["targets"]}
    assert met["every invariance check passing"]
    assert not met["answers equal the committed goldens (verify --server, every invariant model)"]
    fp16["under_load"] = fp16["under_load"] | {"differing": 1}
    (results / "verify-8b-invariant-first.json").write_text(json.dumps(report))
    record = _module("invariance_speed").record(
        results, _kernel_record(tmp_path / "k.json", 0.6, {})
    )
    assert not record["invariance_checks"]["llama-3-8b-fp16-invariant_verify_server_under_load"]


def test_a_config_not_measured_is_null_and_its_target_unmet(results, tmp_path):
    lines = (results / "throughput-8b.jsonl").read_text().splitlines()
    (results / "throughput-8b.jsonl").write_text(
        "\n".join(x for x in lines if '"llama-3-8b-fp16"' not in x) + "\n"
    )
    record = _module("invariance_speed").record(
        results, _kernel_record(tmp_path / "k.json", 0.6, {})
    )
    fp16 = next(c for c in record["end_to_end"] if c["name"] == "llama-3-8b-fp16")
    assert fp16["tok_s_1"] is None and fp16["rounds"] == 0
    assert record["invariant_over_default"]["fp16"] == {"tok_s_1": None, "tok_s_64": None}
    met = {t["what"]: t["met"] for t in record["targets"]}
    assert not met["fp16 invariant / default tok/s, 1 stream"]


class _Ops:
    """Records what w4a16_default passes to vLLM's operations (vllm 0.22.0 machete.py:96-101, 147-154)."""

    def __init__(self):
        self.calls = []

    def machete_prepack_B(self, b_q_weight, a_type, b_type, group_scales_type):
        self.calls.append(("prepack", b_q_weight, a_type, b_type, group_scales_type))
        return "prepacked"

    def machete_mm(self, **kwargs):
        self.calls.append(("mm", kwargs))
        return "out"


def test_machete_gets_words_k_major_column_major_and_scales_k_by_n():
    machete_module = _module("w4a16_default")
    ops = _Ops()
    machete = machete_module.Machete(ops, "uint4b8")
    n, k, group = 48, 256, 128
    packed = torch.arange(n * k // 8, dtype=torch.int32).view(n, k // 8)
    scale = torch.rand((n, k // group)).half()
    weights, scales = machete.prepare(packed, scale)
    _, words, a_type, b_type, scales_type = ops.calls[0]
    # vLLM's view: [K/8, N] (input_dim 0, packed_dim 0), column-major storage (x.t().contiguous().t())
    assert words.shape == (k // 8, n) and words.stride() == (1, k // 8)
    assert torch.equal(words[3, 5], packed[5, 3])
    assert (a_type, b_type, scales_type) == (torch.float16, "uint4b8", torch.float16)
    assert (
        scales.shape == (k // group, n)
        and scales.is_contiguous()
        and torch.equal(scales, scale.t())
    )
    assert machete.matmul("x", weights, scales, group) == "out"
    assert ops.calls[1][1] == {
        "a": "x",
        "b_q": "prepacked",
        "b_type": "uint4b8",
        "b_group_zeros": None,
        "b_group_scales": scales,
        "b_group_size": group,
    }


def test_machete_is_absent_with_its_reason_where_vllm_does_not_import():
    kernel, reason = _module("w4a16_default").load()
    if kernel is not None:
        pytest.skip("vLLM's Machete runs here")
    assert reason and ("vLLM" in reason or "Machete" in reason)


def test_a_verify_that_recorded_goldens_compared_nothing_and_reproduces_nothing(results, tmp_path):
    """2026-12-07, a third H100 lease: `verify --server --record` found no goldens of this machine class for the fp16
    invariant model, recorded them and passed (`goldens_recorded_on` null): nothing was compared, so the record must
    not say the committed goldens were reproduced."""
    report = json.loads((results / "verify-8b-invariant.json").read_text())
    for m in report["models"]:
        m["goldens_recorded_on"] = (
            "Intel(R) Xeon(R) Processor; NVIDIA H100 80GB HBM3 (sm 9.0, 132 SMs)"
        )
    fp16 = next(m for m in report["models"] if m["name"] == "llama-3-8b-fp16-invariant")
    fp16 |= {"passed": True, "goldens_recorded_on": None}
    (results / "verify-8b-invariant.json").write_text(json.dumps(report))
    record = _module("invariance_speed").record(
        results, _kernel_record(tmp_path / "k.json", 0.6, {})
    )
    assert record["goldens_reproduced"] == {
        "llama-3-8b-fp16-invariant": False,
        "llama-3-8b-int4-invariant": True,
    }
    assert record["invariance_checks"]["llama-3-8b-fp16-invariant_verify_server_under_load"]
