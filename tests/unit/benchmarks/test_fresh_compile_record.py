"""benchmarks/vllm/fresh_compile_record.py: the 2026-12-07 record of the second fresh-compile run is what the script
makes from the files the GPU run brought back (committed beside it), and its readings of them."""

from __future__ import annotations

import json

from benchmarks.vllm import fresh_compile_record
from tests.conftest import ROOT

RUN = ROOT / "docs/runs/2026-12-07-fresh-compile-lm-head-h100"
DETERMINISTIC = ROOT / "docs/runs/2026-12-07-fresh-goldens-deterministic-h100"


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


def test_with_inductors_deterministic_mode_two_fresh_compiles_recorded_the_same_bits(monkeypatch):
    """The third fresh-compile run (no throughput measured): the build's Inductor options with deterministic on,
    and both invariant models' recordings of the two starts identical, token ids and log-probs; the committed 8B
    goldens are the second start's."""
    monkeypatch.chdir(ROOT)
    made = fresh_compile_record.record(DETERMINISTIC.relative_to(ROOT))
    assert made == json.loads((ROOT / f"{DETERMINISTIC}.json").read_text())
    assert made["engines"]["inductor_compile_config"]["deterministic"] is True
    assert made["engines"]["every_engine_same_inductor_options"]
    both = made["recorded_by_both_starts"]
    assert set(both) == {"llama-3-8b-fp16-invariant", "llama-3-8b-int4-invariant"}
    for model, seen in both.items():
        assert seen["identical"] and {"0.logprobs", "1.text_output"} <= set(seen["outputs"]), model
        committed = ROOT / f"benchmarks/vllm/goldens/{model}.h100.npz"
        recorded = DETERMINISTIC / f"recorded-fresh-compile-2.{model}.npz"
        assert committed.read_bytes() == recorded.read_bytes()
    assert made["end_to_end"] is None
    assert all(m["passed"] for s in made["starts"] for m in s["models"].values())


def test_a_start_that_found_equal_goldens_says_what_it_was_compared_with():
    model = {"goldens_recorded_on": None, "notes": ["answers equal the goldens recorded before"]}
    assert (
        fresh_compile_record.compared_with(model) == "the goldens recorded before (answers equal)"
    )
    assert fresh_compile_record.compared_with({**model, "notes": []}).startswith("not named")
    named = {**model, "goldens_recorded_on": "NVIDIA H100 80GB HBM3, driver 580"}
    assert fresh_compile_record.compared_with(named) == "NVIDIA H100 80GB HBM3, driver 580"


def test_the_recorded_class_is_the_last_added_or_the_only_one():
    keys = [
        "output.0.logprobs",
        "class.1.output.0.logprobs",
        "class.2.output.0.logprobs",
        "input.0.x",
    ]
    assert fresh_compile_record.recorded_outputs(keys) == ["class.2.output.0.logprobs"]
    assert fresh_compile_record.recorded_outputs(["output.0.logprobs", "input.0.x"]) == [
        "output.0.logprobs"
    ]


def test_log_probs_are_read_from_the_recorded_json_text():
    import numpy as np

    text = json.dumps([{"5": {"logprob": -1.5, "rank": 1}}, {"7": {"logprob": -0.25, "rank": 1}}])
    cell = np.array(
        [(len(text), text.encode())], dtype=[("nbytes", "<u4"), ("data", f"S{len(text)}")]
    )
    assert fresh_compile_record.logprobs(cell) == [-1.5, -0.25]
