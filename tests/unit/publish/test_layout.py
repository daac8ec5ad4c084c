"""The files a published version carries: its version directory, its goldens (inside its version folder at the
target), and what Triton opens beside config.pbtxt (label files, warmup data), never another version's or the
switch itself."""

from __future__ import annotations

from tritonbuild.core.cas import FileEntry
from tritonbuild.publish.layout import in_version_dir, source_rel, version_content, version_files
from tritonbuild.recipe.models import Verify
from tritonbuild.repository.manifest import Manifest, ManifestModel


def _entry(n: int) -> FileEntry:
    return FileEntry(sha256=f"{n:064x}", size=n)


def test_a_version_carries_the_files_triton_opens_beside_its_config():
    names = [
        "m/config.pbtxt",
        "m/config-v1.pbtxt",
        "m/golden-v1.npz",
        "m/golden-v2.npz",
        "m/labels.txt",
        "m/warmup/X",
        "m/1/model.py",
        "m/2/model.py",
        "other/labels.txt",
    ]
    files = {name: _entry(i + 1) for i, name in enumerate(names)}
    model = ManifestModel(
        name="m",
        version=2,
        backend="python",
        target="cpu",
        recipe_path="",
        recipe_sha256="",
        model_identity="",
        inputs=[],
        outputs=[],
        max_batch_size=0,
        verify=Verify(),
        steps={},
        goldens="m/golden-v2.npz",
    )
    got = version_files(Manifest(toolchain={}, models=[model], files=files), model)
    assert sorted(got) == ["2/golden-v2.npz", "2/model.py", "labels.txt", "warmup/X"]
    assert got["2/golden-v2.npz"] == files["m/golden-v2.npz"]
    assert source_rel(model, "2/golden-v2.npz") == "golden-v2.npz"
    assert source_rel(model, "2/model.py") == "2/model.py"
    assert in_version_dir(got, 2) == {
        "2/model.py": files["m/2/model.py"],
        "2/golden-v2.npz": files["m/golden-v2.npz"],
    }
    # what 'never rewritten' compares: the same in either layout, goldens aside
    old = {"2/model.py": files["m/2/model.py"], "golden-v2.npz": _entry(99)}
    assert (
        version_content(got, 2) == version_content(old, 2) == {"2/model.py": files["m/2/model.py"]}
    )
