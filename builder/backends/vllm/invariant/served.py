"""Proof from the server's log that an invariant vLLM model runs the invariant path: its engine
started with tritonbuild's plugin registered in batch-invariant mode, and every W4A16 linear of a
quantized model on the plugin's kernel. vLLM logs a kernel it skips for another nowhere else; a
plugin that fails to load is logged and skipped (vllm 0.22.0 vllm/plugins/__init__.py).

The lines, as vLLM 0.22.0 prints them (tests/contracts/facts/vllm_logs.json; seen on an H100 and an
H200, docs/runs): the engine core's process prefix `(EngineCore pid=N)` on its own lines,
`Initializing a V1 LLM engine (vX) with config: model='PATH', ...` (vllm/v1/engine/core.py L112),
`Using KERNEL for CompressedTensorsWNA16` (compressed_tensors_wNa16.py L112), and the plugin's
registration line in the process that loads the engine (vllm/invariant/plugin.py register). The
engine line's config holds `compilation_config={...}` (vllm/config/vllm.py L1973, the repr of
CompilationConfig, config/compilation.py L797) with its `'inductor_compile_config': {...}`: the
Inductor options the invariance table forces off (row combo_kernels) must not read True there, and
its deterministic mode (row inductor_deterministic) must read True."""

from __future__ import annotations

import re

from tritonbuild.backends.vllm.invariant.plugin import KERNEL_NAME
from tritonbuild.backends.vllm.invariant.table import INDUCTOR_DETERMINISTIC, INDUCTOR_FORCED

ENGINE = re.compile(
    r"\(EngineCore[^ )]* pid=(?P<pid>\d+)\).*?Initializing a V1 LLM engine \(v[^)]*\) with "
    r"config: model='(?P<model>[^']*)'"
)
KERNEL = re.compile(
    r"\(EngineCore[^ )]* pid=(?P<pid>\d+)\).*?Using (?P<kernel>\w+) for CompressedTensorsWNA16"
)
# an Inductor option of INDUCTOR_FORCED on in the engine's config (vLLM's own choice when neither is given)
COMBO = re.compile(rf"'(?P<option>{'|'.join(INDUCTOR_FORCED)})': True\b")
# the engine's Inductor options, as its config's repr prints them
INDUCTOR = re.compile(r"'inductor_compile_config': \{(?P<options>[^}]*)\}")
PLUGIN = f"tritonbuild: {KERNEL_NAME} first among the W4A16 kernels (VLLM_BATCH_INVARIANT)"


def invariant(model) -> bool:
    return ((model.llm or {}).get("serving") or {}).get("determinism") == "invariant"


def _engines(model, lines: list[str]) -> dict[str, int]:
    """The model's vLLM engines in the log: process id -> the line that starts it."""
    mine = f"/{model.name}/{model.version}/"
    return {
        match["pid"]: i
        for i, line in enumerate(lines)
        if (match := ENGINE.search(line)) and mine in match["model"]
    }


def _timed_note(model, lines: list[str]) -> str | None:
    """A default-determinism model whose engine compiled with vLLM's timed combo kernels: where its
    bits may come from (goldens of one compile, another compile's answers)."""
    combo = sorted({o for at in _engines(model, lines).values() for o in COMBO.findall(lines[at])})
    if not combo:
        return None
    return (
        f"its vLLM engine compiled with Inductor's {' and '.join(combo)} on (vLLM's default): "
        "the compile kept the combined kernels that timed faster on this device, so a fresh "
        "compile may answer in other bits than the goldens' (serving.determinism: invariant "
        "turns that off)"
    )


def served_check(model, log: str | None) -> tuple[list[str], str | None]:
    """(problems, note) of a vLLM model from the log of the server that serves it: problems fail
    an invariant model; the note says what could not be checked (no log), or for a default one
    that its compile chose kernels by timing them."""
    if not invariant(model):
        return [], (_timed_note(model, log.splitlines()) if log is not None else None)
    if log is None:
        return [], (
            "which kernels serve it was not checked: no server log (verify --server-log FILE, the "
            "log of the tritonserver at --server)"
        )
    mine = f"/{model.name}/{model.version}/"
    lines = log.splitlines()
    engines = _engines(model, lines)
    if not engines:
        return [
            "the server log has no vLLM engine for it (vLLM's 'Initializing a V1 LLM engine ... "
            f"model=...{mine}...' line): which kernels serve it is unknown"
        ], None
    problems = []
    for pid, at in engines.items():
        if not any(PLUGIN in line for line in lines[:at]):
            problems.append(
                f"its vLLM engine (pid {pid}) started without tritonbuild's invariant plugin "
                "registered in batch-invariant mode: no plugin line before it (the plugin was "
                "not installed, failed to load, or VLLM_BATCH_INVARIANT was not set)"
            )
        if combo := sorted(set(COMBO.findall(lines[at]))):
            problems.append(
                f"its vLLM engine (pid {pid}) compiled with Inductor's {' and '.join(combo)} on: the "
                "compile keeps combined kernels by timing them on the device, so another compile may "
                "answer in other bits (model.json's compilation_config not as tritonbuild built it)"
            )
        # (a line cut short before the config's Inductor options tells nothing of them)
        options = found["options"] if (found := INDUCTOR.search(lines[at])) else None
        off = [o for o in INDUCTOR_DETERMINISTIC if f"'{o}': True" not in (options or "")]
        if options is not None and off:
            problems.append(
                f"its vLLM engine (pid {pid}) compiled without Inductor's {' and '.join(off)} mode: "
                "the compile keeps, for each reduction it generates, the launch configuration that "
                "timed fastest on the device, so another compile may answer in other bits "
                "(model.json's compilation_config not as tritonbuild built it)"
            )
        chosen = {
            match["kernel"]
            for line in lines
            if (match := KERNEL.search(line)) and match["pid"] == pid
        }
        if chosen - {KERNEL_NAME}:
            problems.append(
                f"vLLM chose {', '.join(sorted(chosen - {KERNEL_NAME}))} for its W4A16 linears "
                f"(engine pid {pid}), not {KERNEL_NAME}: the invariant kernel was skipped"
            )
    return problems, None
