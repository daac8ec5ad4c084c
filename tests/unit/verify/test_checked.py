"""check_model's typed result (verify/checked.py): its fields are ModelReport's answer fields with
ModelReport's defaults, so a report made from it is the report the dict made; the recording travels
beside the fields, never into the report."""

from __future__ import annotations

from dataclasses import fields

from tritonbuild.verify.checked import AnswersChecked, Recording
from tritonbuild.verify.models import ModelReport


def test_the_fields_are_model_reports_with_its_defaults():
    checked = AnswersChecked(passed=False)
    report_fields = checked.report_fields()
    assert "recording" not in report_fields and set(report_fields) <= set(ModelReport.model_fields)
    assert {f.name for f in fields(AnswersChecked)} - set(ModelReport.model_fields) == {"recording"}
    for name, value in report_fields.items():
        if name != "passed":
            assert value == ModelReport.model_fields[name].get_default(call_default_factory=True), (
                name
            )
    base = {
        "name": "m",
        "version": 1,
        "backend": "python",
        "route": "in-process",
        "route_detail": "",
    }
    assert ModelReport(**base, loaded=True, **report_fields) == ModelReport(
        **base, loaded=True, passed=False
    )


def test_a_recording_adds_its_note_and_a_refusal_fails_the_check():
    recording = Recording(inputs=[], answers=[], golden=None, numerics=None)
    checked = AnswersChecked(passed=True, notes=["n"], recording=recording)
    kept = checked.recorded("goldens recorded into x", None)
    assert kept.passed and kept.notes == ["n", "goldens recorded into x"]
    assert kept.recording is None and kept.goldens_refused is None
    refused = checked.recorded(None, "another class's answers differ")
    assert not refused.passed and refused.goldens_refused == "another class's answers differ"
    assert refused.notes == ["n", "another class's answers differ"]
