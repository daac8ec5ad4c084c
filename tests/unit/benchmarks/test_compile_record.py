"""benchmarks/vllm/compile_record.py: the 2026-12-07 compile-reproducibility record is what the script makes from the
files the GPU run brought back (committed beside it), and its readings of those files."""

from __future__ import annotations

import json

from benchmarks.vllm import compile_record
from tests.conftest import ROOT

RUN = ROOT / "docs/runs/2026-12-07-compile-reproducibility-h100"


def test_the_committed_record_is_what_the_script_makes_from_its_raw_files(monkeypatch):
    monkeypatch.chdir(
        ROOT
    )  # the record names the folder as its command was given, from the repository root
    made = compile_record.record(RUN.relative_to(ROOT))
    assert made == json.loads((ROOT / f"{RUN}.json").read_text())
    # what it says: the fp16 model's two fresh compiles answered differently, the INT4 model's alike
    assert made["fresh_compiles_agree"] == {
        "llama-3-8b-fp16-invariant": False,
        "llama-3-8b-int4-invariant": True,
    }
    assert (
        "torch/_inductor/scheduler.py:6922 speedup_by_combo_kernel"
        in made["deterministic_mode"]["frames"]
    )
    before, after = made["inductor_compile_config"].values()
    assert {c["benchmark_combo_kernel"] for c in before.values()} == {True}
    assert {c["benchmark_combo_kernel"] for c in after.values()} == {False}


def test_starts_agree_only_if_each_differs_from_the_goldens_in_the_same_outputs():
    def start(*outputs):
        return {"models": {"m": {"differing_outputs": list(outputs)}}}

    assert compile_record.agree([start(), start()], "m") is True
    assert (
        compile_record.agree([start("logprobs (sample 0)"), start("logprobs (sample 0)")], "m")
        is True
    )
    assert compile_record.agree([start("text_output (sample 0)"), start()], "m") is False


def test_an_engine_line_gives_its_models_inductor_options(tmp_path):
    line = (
        "18:(EngineCore pid=1) INFO [core.py:112] Initializing a V1 LLM engine (v0.22.0) with config: "
        "model='/models/m-invariant/1/model', compilation_config={'mode': 3, 'inductor_compile_config': "
        "{'combo_kernels': True, 'benchmark_combo_kernel': True}, 'inductor_passes': {}}"
    )
    (tmp_path / "x.engine-lines").write_text(line + "\n9:no engine here\n")
    got = compile_record.engine_configs(tmp_path / "x.engine-lines")
    assert got == {"m-invariant": {"combo_kernels": True, "benchmark_combo_kernel": True}}
