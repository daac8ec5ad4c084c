"""An invariant vLLM model's proof from the server's log (backends/vllm/invariant/served.py), on the lines a real server
printed (vLLM 0.22.0 through Triton's vLLM backend on an H100: docs/runs/2026-12-06-llm-invariant-h100) and on the
formats recorded from vLLM's source (tests/contracts/facts/vllm_logs.json)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tests.conftest import ROOT
from tritonbuild.backends.vllm.invariant import served
from tritonbuild.backends.vllm.invariant.plugin import KERNEL_NAME

REAL = ROOT / "docs/runs/2026-12-06-llm-invariant-h100/server-8b-invariant.engine-lines"
FACTS = json.loads((ROOT / "tests/contracts/facts/vllm_logs.json").read_text())


def _log() -> str:
    return "\n".join(line.split(":", 1)[1] for line in REAL.read_text().splitlines())


def _model(name: str, determinism: str = "invariant"):
    return SimpleNamespace(name=name, version=1, llm={"serving": {"determinism": determinism}})


@pytest.mark.parametrize("name", ["llama-3-8b-fp16-invariant", "llama-3-8b-int4-invariant"])
def test_the_real_servers_log_proves_both_invariant_models(name):
    assert served.served_check(_model(name), _log()) == ([], None)


def test_a_w4a16_linear_on_another_kernel_fails_naming_it():
    log = _log().replace(f"Using {KERNEL_NAME}", "Using MacheteLinearKernel")
    problems, _ = served.served_check(_model("llama-3-8b-int4-invariant"), log)
    assert len(problems) == 1 and "vLLM chose MacheteLinearKernel" in problems[0]
    assert "pid 1886" in problems[0]
    # one kernel class line per process: a second class for some linears is caught too
    both = (
        _log()
        + "\n(EngineCore pid=1886) INFO [x] Using MarlinLinearKernel for CompressedTensorsWNA16"
    )
    problems, _ = served.served_check(_model("llama-3-8b-int4-invariant"), both)
    assert problems and "MarlinLinearKernel" in problems[0]


def test_an_engine_without_the_plugin_line_before_it_fails():
    log = "\n".join(line for line in _log().splitlines() if "tritonbuild:" not in line)
    for name in ("llama-3-8b-fp16-invariant", "llama-3-8b-int4-invariant"):
        problems, _ = served.served_check(_model(name), log)
        assert problems and "without tritonbuild's invariant plugin" in problems[0]


def test_no_engine_for_the_model_no_log_and_default_models():
    problems, _ = served.served_check(_model("other"), _log())
    assert "has no vLLM engine for it" in problems[0]
    assert served.served_check(_model("x"), None)[0] == []
    assert "no server log" in served.served_check(_model("x"), None)[1]
    assert served.served_check(_model("x", "default"), "") == ([], None)


def test_the_patterns_match_the_lines_as_vllms_source_formats_them():
    prefix = FACTS["process_prefix"]["format"].format(worker_name="EngineCore", pid=42)
    config = "model='/models/m/3/model', speculative_config=None"
    engine = FACTS["engine_config"]["format"] % ("0.22.0", config)
    kernel = FACTS["wna16_kernel"]["format"] % KERNEL_NAME
    line = f"{prefix}INFO 12-06 04:00:49 [core.py:112] {engine}"
    assert served.ENGINE.search(line)["model"] == "/models/m/3/model"
    assert served.KERNEL.search(f"{prefix}INFO [x] {kernel}")["kernel"] == KERNEL_NAME
    assert FACTS["plugin_line"]["format"] % KERNEL_NAME == served.PLUGIN
    coloured = f"\x1b[36m(EngineCore pid=42)\x1b[0m INFO [core.py:112] {engine}"
    assert served.ENGINE.search(coloured)["pid"] == "42"


RUN_1207 = ROOT / "docs/runs/2026-12-07-compile-reproducibility-h100"


def _lines(name: str) -> str:
    return "\n".join(line.split(":", 1)[1] for line in (RUN_1207 / name).read_text().splitlines())


@pytest.mark.parametrize("name", ["llama-3-8b-fp16-invariant", "llama-3-8b-int4-invariant"])
def test_an_engine_compiled_with_inductors_combo_kernels_timed_fails(name):
    """The engine lines of an H100 server (2026-12-07): as built before row combo_kernels, vLLM turned on Inductor's
    combo kernels and their timing (its default); with model.json giving both false, the engine's config says so."""
    problems, _ = served.served_check(
        _model(name), _lines("server-invariant-combo-on.engine-lines")
    )
    assert problems and any(
        "Inductor's benchmark_combo_kernel and combo_kernels on" in p for p in problems
    )
    off = _lines("server-invariant-combo-off.engine-lines")
    assert served.served_check(_model(name), _deterministic(off)) == ([], None)


def _deterministic(lines: str) -> str:
    """The engine lines as an engine compiled from today's model.json logs them: Inductor's deterministic mode on."""
    return lines.replace(
        "'combo_kernels': False,", "'combo_kernels': False, 'deterministic': True,"
    )


@pytest.mark.parametrize("name", ["llama-3-8b-fp16-invariant", "llama-3-8b-int4-invariant"])
def test_an_invariant_engine_compiled_without_inductors_deterministic_mode_fails(name):
    """Row inductor_deterministic: the H100 engines of 2026-12-07 had combo kernels off but not Inductor's
    deterministic mode (each reduction's launch configuration timed at its first run): two fresh compiles of the fp16
    model gave different log-probs (docs/runs/2026-12-07-fresh-compile-lm-head-h100.json). An engine line cut short
    before its Inductor options says nothing of them."""
    off = _lines("server-invariant-combo-off.engine-lines")
    assert "'deterministic'" not in off and "'combo_kernels': False," in off
    problems, _ = served.served_check(_model(name), off)
    assert problems and all("compiled without Inductor's deterministic mode" in p for p in problems)
    assert "timed fastest on the device" in problems[0]
    false = _deterministic(off).replace("'deterministic': True", "'deterministic': False")
    assert served.served_check(_model(name), false)[0] == problems
    assert served.served_check(_model(name), _log()) == ([], None)  # cut at 400 characters


@pytest.mark.parametrize("name", ["llama-3-8b-fp16", "llama-3-8b-int4"])
def test_a_default_models_engine_that_timed_its_combo_kernels_is_told_not_failed(name):
    """A default-determinism model (the same H100, 2026-12-07): its engine compiled with vLLM's timed combo kernels,
    so its goldens bind to that compile; verify says so in a note and does not fail it. An engine without them:
    nothing to say."""
    problems, note = served.served_check(
        _model(name, "default"), _lines("server-default.engine-lines")
    )
    assert problems == [] and "benchmark_combo_kernel and combo_kernels on (vLLM's default)" in note
    assert "fresh compile may answer in other bits" in note
    off = _lines("server-invariant-combo-off.engine-lines").replace("-invariant/", "/")
    assert served.served_check(_model(name, "default"), off) == ([], None)
