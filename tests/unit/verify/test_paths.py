"""How verify routes a model: an ensemble cycle in a repository is a finding, not a RecursionError."""

from __future__ import annotations

from tritonbuild.repository.manifest import Manifest, ManifestModel
from tritonbuild.verify.run import _path_for


def _m(name: str, depends_on: list[str]) -> ManifestModel:
    return ManifestModel(name=name, version=1, backend="ensemble", target="cpu", recipe_path="r.yaml",
                         recipe_sha256="0" * 64, model_identity="0" * 64, inputs=[], outputs=[], max_batch_size=0,
                         verify={}, steps={}, depends_on=depends_on)


def test_ensemble_cycle_routes_to_none():
    manifest = Manifest(toolchain={}, models=[_m("a", ["b"]), _m("b", ["a"])], files={})
    path, detail = _path_for(manifest.model("a"), None, manifest)
    assert path == "none" and "calls ['b']" in detail


def test_missing_step_routes_to_none():
    manifest = Manifest(toolchain={}, models=[_m("a", ["ghost"])], files={})
    path, detail = _path_for(manifest.model("a"), None, manifest)
    assert path == "none" and "ghost" in detail
