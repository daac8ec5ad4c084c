"""benchmarks/vllm/fresh_compile_record.py: the 2026-12-07 record of the second fresh-compile run is what the script
makes from the files the GPU run brought back (committed beside it), and its readings of them."""

from __future__ import annotations

import json

from benchmarks.vllm import fresh_compile_record
from tests.conftest import ROOT

RUN = ROOT / "docs/runs/2026-12-07-fresh-compile-lm-head-h100"


def test_the_committed_record_is_what_the_script_makes_from_its_raw_files(monkeypatch):
    monkeypatch.chdir(
        ROOT
    )  # the record names the folder as its command was given, from the repository root
    made = fresh_compile_record.record(RUN.relative_to(ROOT))
    assert made == json.loads((ROOT / f"{RUN}.json").read_text())
    # combo kernels off in every engine, the lm_head on the plugin's linear
    engines = made["engines"]
    assert engines["inductor_compile_config"]["combo_kernels"] is False
    assert "deterministic" not in engines["inductor_compile_config"]
    assert engines["every_engine_same_inductor_options"] and engines["lm_head_taken_lines"] >= 2
    # the fp16 model's two fresh compiles: the same text, every token's log-prob different
    fp16 = made["recorded_by_both_starts"]["llama-3-8b-fp16-invariant"]
    assert not fp16["identical"]
    for sample in ("0", "1"):
        assert fp16["outputs"][f"{sample}.text_output"]["identical"]
        logprobs = fp16["outputs"][f"{sample}.logprobs"]
        assert (
            logprobs["differing"] == logprobs["tokens"] == 16
            and 0 < logprobs["max_abs_diff"] < 0.01
        )
    # batch invariance held in both starts, for both models
    assert {m["batch_invariance"] for s in made["starts"] for m in s["models"].values()} == {
        "invariant"
    }
    # three interleaved rounds per config; INT4 invariant faster than default at one stream
    ratios = made["end_to_end"]["invariant_over_default"]
    assert all(
        len(v["rounds"]) == 3 for m in made["end_to_end"]["models"].values() for v in m.values()
    )
    assert ratios["int4-w4a16_1_streams"]["paired_rounds_min"] > 1.0


def test_log_probs_are_read_from_the_recorded_json_text():
    import numpy as np

    text = json.dumps([{"5": {"logprob": -1.5, "rank": 1}}, {"7": {"logprob": -0.25, "rank": 1}}])
    cell = np.array(
        [(len(text), text.encode())], dtype=[("nbytes", "<u4"), ("data", f"S{len(text)}")]
    )
    assert fresh_compile_record.logprobs(cell) == [-1.5, -0.25]
