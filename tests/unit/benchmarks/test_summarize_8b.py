"""benchmarks/vllm/summarize_8b.py on a fixture results directory (what h200_8b.sh leaves in /tmp/vw/results)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = Path(__file__).with_name("fixtures") / "llm-8b"


def _module():
    spec = importlib.util.spec_from_file_location(
        "summarize_8b", ROOT / "benchmarks" / "vllm" / "summarize_8b.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_record_has_exactly_the_agreed_fields():
    record = _module().summarize(FIXTURE)
    assert set(record) == {"machine", "vllm", "geometry", "configs", "verify", "verify_notes"}
    assert record["machine"] == {"gpu": "NVIDIA H200"} and record["vllm"] == "0.22.0"
    assert record["geometry"] == "llama-3-8b"
    keys = {
        "name",
        "quantization",
        "invariant",
        "kernel",
        "loaded_runs",
        "ids_identical",
        "logprobs_identical",
        "soak_answers",
        "soak_differing",
        "tok_s_1",
        "tok_s_64",
        "loaded_source",
    }
    assert all(set(c) == keys for c in record["configs"])
    assert json.loads(json.dumps(record)) == record


def test_each_config_reads_its_own_figures_and_kernel():
    by_name = {c["name"]: c for c in _module().summarize(FIXTURE)["configs"]}
    int4 = by_name["llama-3-8b-int4"]
    assert (int4["quantization"], int4["invariant"], int4["kernel"]) == (
        "int4-w4a16",
        False,
        "MacheteLinearKernel",
    )
    assert (int4["loaded_runs"], int4["ids_identical"], int4["logprobs_identical"]) == (10, 6, 0)
    assert (int4["soak_answers"], int4["soak_differing"]) == (9400, 9000)
    inv = by_name["llama-3-8b-int4-invariant"]
    assert inv["invariant"] and inv["kernel"] == "TritonbuildInvariantW4A16Kernel"
    assert (inv["ids_identical"], inv["logprobs_identical"], inv["soak_differing"]) == (10, 10, 0)
    assert by_name["llama-3-8b-fp16"]["kernel"] == "unquantized"
    # the last line of a model wins (a step run again)
    assert (by_name["llama-3-8b-fp16"]["tok_s_1"], by_name["llama-3-8b-fp16"]["tok_s_64"]) == (
        202.1,
        7709.3,
    )


def test_verify_under_load_verdicts():
    assert _module().summarize(FIXTURE)["verify"] == {
        "default_under_load": "FAIL",
        "invariant_under_load": "PASS",
    }


def test_missing_results_are_null_not_errors(tmp_path):
    shutil.copy(FIXTURE / "gpu.txt", tmp_path)
    record = _module().summarize(tmp_path)
    assert record["verify"] == {"default_under_load": None, "invariant_under_load": None}
    int4 = next(c for c in record["configs"] if c["name"] == "llama-3-8b-int4")
    assert int4["kernel"] is None and int4["soak_answers"] is None and int4["tok_s_64"] is None


def test_a_model_verify_could_not_load_is_no_verdict_and_says_why(tmp_path):
    """A verify run where the models failed to load says nothing about answers under load: no FAIL, a note (on the
    H200 verify's reload of served models failed both default models; the verdict must not read as a FAIL)."""
    import shutil

    results = tmp_path / "results"
    shutil.copytree(FIXTURE, results)
    (results / "determinism-8b.jsonl").unlink()
    failed = "tritonserver failed to load: Engine core initialization failed"
    report = {
        "passed": False,
        "models": [
            {
                "name": n,
                "passed": False,
                "loaded": False,
                "batch_invariance": "skipped",
                "load_error": failed,
            }
            for n in ("llama-3-8b-fp16", "llama-3-8b-int4")
        ],
    }
    (results / "verify-8b-default.json").write_text(json.dumps(report))
    record = _module().summarize(results)
    assert record["verify"]["default_under_load"] is None
    assert any("llama-3-8b-fp16: not checked under load" in note for note in record["verify_notes"])
    fp16 = next(c for c in record["configs"] if c["name"] == "llama-3-8b-fp16")
    assert fp16["loaded_runs"] is None and fp16["loaded_source"] is None
