"""How verify routes a model (the route in the report): an ensemble cycle in a repository is a finding, not a
RecursionError; the report keeps the route's first keys (path, path_detail) beside route and route_detail."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.unit.verify.manifests import manifest_model
from tritonbuild.repository.manifest import Manifest, ManifestModel
from tritonbuild.verify.models import ModelReport
from tritonbuild.verify.routes import route_for


def _model(name: str, depends_on: list[str]) -> ManifestModel:
    return manifest_model(name, backend="ensemble", depends_on=depends_on)


def test_ensemble_cycle_routes_to_none():
    manifest = Manifest(toolchain={}, models=[_model("a", ["b"]), _model("b", ["a"])], files={})
    route, detail = route_for(manifest.model("a"), None, manifest)
    assert route == "none" and "calls ['b']" in detail


def test_missing_step_routes_to_none():
    manifest = Manifest(toolchain={}, models=[_model("a", ["ghost"])], files={})
    route, detail = route_for(manifest.model("a"), None, manifest)
    assert route == "none" and "ghost" in detail


def _report(**route) -> dict:
    return {"name": "a", "version": 1, "backend": "python", "loaded": True, "passed": True, **route}


def test_the_report_names_the_route_and_keeps_its_first_keys():
    report = ModelReport(
        **_report(route="live-embedded", route_detail="tritonserver 2.51.0 embedded")
    )
    doc = report.model_dump(mode="json")
    assert (doc["route"], doc["route_detail"]) == ("live-embedded", "tritonserver 2.51.0 embedded")
    assert (doc["path"], doc["path_detail"]) == (
        doc["route"],
        doc["route_detail"],
    )  # readers of 'path' keep working
    assert ModelReport.model_validate(doc) == report


def test_a_report_written_before_route_is_read():
    old = ModelReport.model_validate(
        _report(path="in-process", path_detail="onnxruntime 1.20 in-process")
    )
    assert (old.route, old.route_detail) == ("in-process", "onnxruntime 1.20 in-process")


def test_a_report_whose_path_and_route_differ_is_refused():
    with pytest.raises(ValidationError, match=r"'path' .* differs from 'route'"):
        ModelReport.model_validate(
            _report(route="none", route_detail="x", path="live-embedded", path_detail="x")
        )
