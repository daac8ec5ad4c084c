"""The offline port of Triton's rules against the corpus (tests/fixtures/triton_corpus/), every backend kind.
The same cases are confirmed against the real tritonserver in tests/integration/test_triton_corpus.py."""

from __future__ import annotations

import pytest

from tests.triton_corpus import KINDS, cases, expected, materialize, standin_model
from tritonbuild.repository.rules import check_model_dir


def test_corpus_size():
    refused, accepted = cases("refused"), cases("accepted")
    assert len(refused) >= 100 and len(accepted) >= 40
    assert len({c["id"] for c in refused + accepted}) == len(refused) + len(accepted)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_static_rules_refuse_with_tritons_words(tmp_path, kind):
    written = materialize(tmp_path, cases("refused"), kind, standin_model(), suffix=True)
    missed = {}
    for name, case in written.items():
        if case.get("static", True) is False:
            continue
        details = [f.detail for f in check_model_dir(tmp_path / name) if not f.ok]
        if not any(expected(case, name) in d for d in details):
            missed[name] = details
    assert missed == {}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_static_rules_accept_what_triton_loads(tmp_path, kind):
    written = materialize(tmp_path, cases("accepted"), kind, standin_model(), suffix=True)
    # (the corpus's model files are placeholders: the ONNX-graph check is tested in test_onnx_rules.py)
    refused = {
        n: [
            f"{f.check}: {f.detail}"
            for f in check_model_dir(tmp_path / n)
            if not f.ok and f.check != "onnx"
        ]
        for n in written
    }
    assert {n: d for n, d in refused.items() if d} == {}
