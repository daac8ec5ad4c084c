"""The corpus (tests/fixtures/triton_corpus/) against the real tritonserver, and `tritonbuild verify` over it for
every backend kind: Triton's cause in every refusal, every accepted config passes."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.timing import limit
from tests.triton_corpus import KINDS, cases, expected, materialize, standin_model

pytestmark = pytest.mark.triton


@pytest.mark.slow
def test_corpus_confirmed_by_tritonserver(tmp_path):
    """Every case as written (python backend; raw cases whole), in one server start: refused ones with Triton's
    message (the log's poll cause, or the load error), accepted ones loaded. The server starts as verify's does for
    them (their class has no auto_complete_config: without the backend's auto-complete stub, the same verdicts,
    tests/integration/test_standin_autocomplete.py)."""
    from tritonbuild.server.embedded import EmbeddedServer
    from tritonbuild.server.loading import ModelLoadError, load_model
    from tritonbuild.triton.standin import explain_load_error
    from tritonbuild.verify.triton_core import server_options

    refused = materialize(tmp_path, cases("refused"), "python", standin_model())
    accepted = materialize(tmp_path, cases("accepted"), "python", standin_model())
    ensembles = {n for n, c in {**refused, **accepted}.items() if c.get("ensemble")}
    errors = {}
    python = frozenset(
        n for n, c in {**refused, **accepted}.items() if not c.get("raw") and n not in ensembles
    )
    options = server_options(tmp_path, python)
    assert options  # their class has no auto_complete_config
    with EmbeddedServer(tmp_path, options=options) as server:

        def one(name):
            try:
                load_model(f"http://{server.http_url}", name)
            except ModelLoadError as e:
                return e.message
            return None

        for batch in (
            [n for n in {**refused, **accepted} if n not in ensembles],
            sorted(ensembles),
        ):
            with ThreadPoolExecutor(8) as pool:
                errors.update(zip(batch, pool.map(one, batch), strict=True))
        log = server.log_path.read_text(errors="replace")
    wrong = {n: errors[n] and explain_load_error(errors[n], log, n) for n in refused}
    wrong = {n: e for n, e in wrong.items() if e is None or expected(refused[n], n) not in e}
    assert wrong == {}
    assert {n: errors[n] for n in accepted if errors[n] is not None} == {}


def _verify_every_case_as(kind: str, tmp_path) -> None:
    """One repository holding the corpus as models of one backend kind (models '<id>.<kind>'); `tritonbuild verify`
    (no manifest: Triton's rules offline + Triton's core through stand-ins, one server start) refuses each refused
    model with Triton's cause in its triton-core row, and passes every accepted one."""
    repo = tmp_path / "repo"
    repo.mkdir()
    # verify loads a hand-written Python model itself (its initialize() runs): that kind's model.py is a real model
    # (the stand-in's, which answers any config); the other kinds' model.py files are never run
    model_py = standin_model() if kind == "python" else "# model file of a python model\n"
    refused = materialize(repo, cases("refused"), kind, model_py, suffix=True)
    accepted = materialize(repo, cases("accepted"), kind, model_py, suffix=True)
    r = subprocess.run(
        [sys.executable, "-m", "tritonbuild", "verify", str(repo), "--json"],
        capture_output=True,
        text=True,
        timeout=limit(81),  # the slowest kind's whole test: 81 s (2026-12-06, beside other jobs)
    )
    assert r.returncode == 6, r.stderr[-3000:]
    report = json.loads(r.stdout)
    rows = {}
    for c in report["static"]:
        rows.setdefault(c["model"], []).append(c)
    # NOTE: a core refusal in the words of an offline finding is not a row of its own: that row says tritonserver
    # refused it the same way (verify/triton_core.without_repeats), and is then Triton's verdict for the model
    core = {
        n: next((c for c in rows[n] if c["check"] == "triton-core"), None)
        or next(
            c for c in rows[n] if c["detail"].endswith("(tritonserver refused it the same way)")
        )
        for n in rows
    }
    missed = {
        n: core[n]["detail"]
        for n in refused
        if core[n]["ok"] or expected(refused[n], n) not in core[n]["detail"]
    }
    # Rules that need the real backend name (platform/backend pair, empty backend) are static: the stand-in runs
    # under `backend: python`. Their Triton message must then be in a static row.
    for n in list(missed):
        if refused[n].get("raw") and any(
            not c["ok"] and expected(refused[n], n) in c["detail"] for c in rows[n]
        ):
            del missed[n]
    assert missed == {}
    # (the corpus's model files are placeholders: the checks that open them — ONNX graph, TorchScript forward() —
    # are tested in tests/unit/repository and tests/unit/backends)
    bad = {
        n: [c for c in rows[n] if not c["ok"] and c["check"] not in ("onnx", "libtorch")]
        for n in accepted
    }
    assert {n: b for n, b in bad.items() if b} == {}
    assert len(refused) > 100 and len(accepted) > 40


# One class per backend kind: the test runner keeps a class's tests on one worker and spreads the classes, so the
# four verifications (each one server start over ~185 models) run side by side in the full suite.
@pytest.mark.slow
class TestVerifyEveryCaseAsPython:
    def test_verify(self, tmp_path):
        _verify_every_case_as("python", tmp_path)


@pytest.mark.slow
class TestVerifyEveryCaseAsOnnxruntime:
    def test_verify(self, tmp_path):
        _verify_every_case_as("onnxruntime", tmp_path)


@pytest.mark.slow
class TestVerifyEveryCaseAsPytorch:
    def test_verify(self, tmp_path):
        _verify_every_case_as("pytorch", tmp_path)


@pytest.mark.slow
class TestVerifyEveryCaseAsTensorrt:
    def test_verify(self, tmp_path):
        _verify_every_case_as("tensorrt", tmp_path)


def test_every_backend_kind_has_its_verification():
    """The four classes above cover KINDS exactly (a new kind in the corpus needs its class)."""
    covered = {
        name.removeprefix("TestVerifyEveryCaseAs").lower()
        for name in globals()
        if name.startswith("TestVerifyEveryCaseAs")
    }
    assert covered == set(KINDS)
