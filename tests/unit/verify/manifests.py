"""A ManifestModel with the fields a verify unit test does not care about filled in."""

from __future__ import annotations

from tritonbuild.repository.manifest import ManifestModel


def manifest_model(name: str, **fields) -> ManifestModel:
    """A version-1 CPU model of name; fields override (backend, depends_on, ...)."""
    return ManifestModel(
        **{
            "name": name,
            "version": 1,
            "backend": "python",
            "target": "cpu",
            "recipe_path": "r.yaml",
            "recipe_sha256": "0" * 64,
            "model_identity": "0" * 64,
            "inputs": [],
            "outputs": [],
            "max_batch_size": 0,
            "verify": {},
            "steps": {},
            **fields,
        }
    )
