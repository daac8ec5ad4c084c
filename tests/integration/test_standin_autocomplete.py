"""Stand-ins loaded without the Python backend's auto-complete (verify/triton_core.py NO_BACKEND_AUTOCOMPLETE),
against the real tritonserver: the option turns the backend's auto-complete stub off, and Triton's verdict on every
stand-in is the same both ways, refusals at poll and at load alike (tests/contracts/facts/triton_autocomplete.json).
The whole corpus verified as the three stood-in kinds gave the same report both ways (2026-12-06, by hand: 1,308,
1,308 and 1,153 rows, identical)."""

from __future__ import annotations

import pytest

from tests.contracts.facts import load
from tests.triton_corpus import cases, materialize
from tritonbuild.triton.standin import STANDIN_MODEL, write_standins
from tritonbuild.verify.triton_core import NO_BACKEND_AUTOCOMPLETE, server_options

pytestmark = pytest.mark.triton

# accepted; refused at load, in the core's checks after the backend's auto-complete (an input without dims);
# refused at poll, before any backend (a negative max_batch_size)
CASES = {"ok-minimal", "ok-dynamic-batching-preferred", "in-no-dims", "mbs-negative"}


def _load_all(scratch, names, options):
    """Triton's verdict on each model (None: loaded) and the stubs the Python backend started, by name."""
    from tritonbuild.server.embedded import EmbeddedServer
    from tritonbuild.server.loading import ModelLoadError, load_model
    from tritonbuild.triton.standin import explain_load_error

    verdicts = {}
    with EmbeddedServer(scratch, log_verbose=1, options=options) as server:
        for name in names:
            try:
                load_model(f"http://{server.http_url}", name)
                verdicts[name] = None
            except ModelLoadError as e:
                verdicts[name] = e.message
        log = server.log_path.read_text(errors="replace")
    stubs = [
        line.split(load("triton_autocomplete")["stub_log"]["log"], 1)[1].strip(' "').split()
        for line in log.splitlines()
        if load("triton_autocomplete")["stub_log"]["log"] in line
    ]
    verdicts = {n: e and explain_load_error(e, log, n) for n, e in verdicts.items()}
    return verdicts, stubs


def test_stand_ins_get_the_same_verdicts_without_the_auto_complete_stub(tmp_path):
    chosen = [c for which in ("accepted", "refused") for c in cases(which) if c["id"] in CASES]
    assert {c["id"] for c in chosen} == CASES
    models = materialize(tmp_path / "repo", chosen, "onnxruntime", "", suffix=True)
    write_standins(tmp_path / "repo", sorted(models), tmp_path / "scratch", have_gpu=False)
    assert server_options(tmp_path / "scratch", frozenset()) == [NO_BACKEND_AUTOCOMPLETE]
    names = sorted(models)
    with_ac, stubs_with = _load_all(tmp_path / "scratch", names, [])
    without, stubs_without = _load_all(tmp_path / "scratch", names, [NO_BACKEND_AUTOCOMPLETE])
    assert without == with_ac
    loaded = {n for n, e in with_ac.items() if e is None}
    assert loaded == {"ok-minimal.onnxruntime", "ok-dynamic-batching-preferred.onnxruntime"}
    assert "must specify 'dims'" in with_ac["in-no-dims.onnxruntime"]
    assert "must be non-negative" in with_ac["mbs-negative.onnxruntime"]
    # an auto-complete stub is named after its model (an instance's after the instance): one for each model
    # that reached the backend (the loaded ones and the one refused at load), none without auto-complete
    autocompleted = {n for n in names for argv in stubs_with if n in argv}
    assert autocompleted == loaded | {"in-no-dims.onnxruntime"}
    assert not {n for n in names for argv in stubs_without if n in argv}
    # the instances start alike both ways
    assert len(stubs_without) == len(loaded) and len(stubs_with) == len(loaded) + len(autocompleted)


HANDWRITTEN = {
    "loads": STANDIN_MODEL,
    "raises-in-initialize": (
        "class TritonPythonModel:\n    def initialize(self, args):\n        raise ValueError('no')\n"
    ),
    "imports-what-is-absent": "import no_such_module_here\n\n\nclass TritonPythonModel:\n    pass\n",
    "fails-at-import": "raise RuntimeError('at import')\n\n\nclass TritonPythonModel:\n    pass\n",
}


def test_python_models_without_auto_complete_config_get_the_same_verdicts_without_the_stub(
    tmp_path,
):
    """Hand-written Python models whose class provably has no auto_complete_config (declares_no_auto_complete),
    loaded as themselves: Triton's verdict is the same without the backend's auto-complete stub, for a model that
    loads, one whose initialize() raises, two whose import fails (a missing module: verify's 'not here' cause),
    and a config the core refuses after the backend (an input without dims); no auto-complete stub without it."""
    from tritonbuild.triton.standin import declares_no_auto_complete
    from tritonbuild.verify.triton_core import not_here_cause

    root = tmp_path / "repo"
    io = 'output [{name: "y", data_type: TYPE_FP32, dims: [4]}]\n'
    for name, source in {**HANDWRITTEN, "in-no-dims": STANDIN_MODEL}.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(source)
        dims = "" if name == "in-no-dims" else ", dims: [4]"
        (root / name / "config.pbtxt").write_text(
            f'name: "{name}"\nbackend: "python"\nmax_batch_size: 8\n'
            f'input [{{name: "x", data_type: TYPE_FP32{dims}}}]\n{io}'
        )
        assert declares_no_auto_complete(root / name), name
    assert server_options(root, frozenset(p.name for p in root.iterdir())) == [
        NO_BACKEND_AUTOCOMPLETE
    ]
    names = sorted(p.name for p in root.iterdir())
    with_ac, stubs_with = _load_all(root, names, [])
    without, stubs_without = _load_all(root, names, [NO_BACKEND_AUTOCOMPLETE])
    assert {n for n, e in with_ac.items() if e is None} == {"loads"}
    assert "must specify 'dims'" in with_ac["in-no-dims"]
    assert "imports 'no_such_module_here'" in not_here_cause(root / "imports-what-is-absent", without[
        "imports-what-is-absent"])  # fmt: skip
    assert without == with_ac
    # every model reached the backend: one auto-complete stub each with it, none without
    assert {n for n in names for argv in stubs_with if n in argv} == set(names)
    assert not {n for n in names for argv in stubs_without if n in argv}
