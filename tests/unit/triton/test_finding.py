"""triton/finding.py: the one row type a rule yields, assemble refuses on and the verification report carries."""

import json

import pytest
from pydantic import ValidationError

from tritonbuild.repository.rules import check_model_dir
from tritonbuild.triton.finding import Finding
from tritonbuild.verify.models import VerificationReport


def _misnamed(tmp_path):
    d = tmp_path / "other"
    (d / "1").mkdir(parents=True)
    (d / "1" / "model.py").write_text("")
    (d / "config.pbtxt").write_text(
        'name: "m"\nbackend: "python"\ninput { name: "X" data_type: TYPE_FP32 '
        'dims: [3] }\noutput { name: "Y" data_type: TYPE_FP32 dims: [3] }\n'
    )
    return d


def test_rule_findings_go_into_the_report_as_they_are(tmp_path):
    findings = check_model_dir(_misnamed(tmp_path))
    assert findings and all(type(f) is Finding for f in findings)
    report = VerificationReport(
        manifest_digest="", toolchain={}, static=findings, models=[], passed=False
    )
    assert report.static == findings
    rows = json.loads(report.model_dump_json())["static"]
    assert all(list(row) == ["model", "check", "ok", "detail"] for row in rows)
    (name,) = [row for row in rows if row["check"] == "name"]
    assert (name["model"], name["ok"]) == ("other", False)
    assert VerificationReport.model_validate_json(report.model_dump_json()).static == findings


def test_a_finding_is_frozen_and_has_no_other_fields():
    finding = Finding(model="m", check="versions", ok=True, detail="versions [1]")
    with pytest.raises(ValidationError):
        finding.ok = False
    with pytest.raises(ValidationError):
        Finding(model="m", check="versions", ok=True, detail="", hint="none")
