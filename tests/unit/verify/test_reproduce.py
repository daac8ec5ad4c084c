"""verify --rebuild's comparison: which differing files are left to the goldens is each backend's word
(Backend.unreproducible_files through the registry), not a list of suffixes in verify/."""

from __future__ import annotations

import pytest

from tests.plugins.toyrt import ToyBackend
from tests.unit.verify.manifests import manifest_model
from tritonbuild.backends import REGISTRY
from tritonbuild.core.cas import FileEntry
from tritonbuild.repository.manifest import Manifest
from tritonbuild.verify.reproduce import compare


def _manifest(files: dict[str, str]) -> Manifest:
    models = sorted({rel.split("/", 1)[0] for rel in files})
    return Manifest(
        toolchain={},
        files={rel: FileEntry(sha256=digest * 64, size=1) for rel, digest in files.items()},
        models=[manifest_model(name) for name in models],
    )


@pytest.mark.parametrize(
    "rel, vendor",
    [
        ("scaler/1/model.plan", "tensorrt"),
        ("llm/1/engine/rank0.engine", "tensorrtllm"),
        ("llm/1/engine/config.json", "tensorrtllm"),
    ],
)
def test_a_differing_engine_is_left_to_the_goldens(rel, vendor):
    report = compare(
        _manifest({rel: "a", "m/1/model.py": "c"}), _manifest({rel: "b", "m/1/model.py": "c"})
    )
    assert report.identical == 1 and not report.differ
    assert report.by_nature == [
        f"{rel}: not byte-reproducible by nature (a {vendor} build: its "
        "unreproducible_files); its goldens decide"
    ]


def test_any_other_differing_file_is_not_reproducible():
    report = compare(_manifest({"m/1/model.py": "a"}), _manifest({"m/1/model.py": "b"}))
    assert not report.by_nature and "NOT REPRODUCIBLE" in report.differ[0]


def test_a_registered_backend_declares_its_own():
    class Vendor(ToyBackend):
        unreproducible_files = ("*.toy",)

    before, after = _manifest({"t/1/model.toy": "a"}), _manifest({"t/1/model.toy": "b"})
    assert compare(before, after).differ
    with REGISTRY.registered(Vendor()):
        assert (
            compare(before, after)
            .by_nature[0]
            .startswith("t/1/model.toy: not byte-reproducible by nature (a toy")
        )
