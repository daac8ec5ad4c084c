"""A source given as file://PATH is the file store's URL for every backend (core/stores.is_url, the one test):
fetched and pinned like s3://. Before, the ONNX backend alone read it as a local path, unpinned."""

from __future__ import annotations

from tests.conftest import ROOT


def test_an_onnx_source_by_file_url_is_fetched_and_must_be_pinned(cli, tmp_path):
    from tritonbuild.core.hashing import sha256_file

    onnx = ROOT / "recipes" / "examples" / "scaler" / "model.onnx"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: scaler\nversion: 1\nbackend: onnxruntime\nsource: {{path: 'file://{onnx}'}}\n"
        "max_batch_size: 4\n"
    )
    unpinned = cli("build", recipe, "-o", tmp_path / "OUT")
    assert unpinned.exit_code == 4 and "is remote and not pinned" in unpinned.stderr
    recipe.write_text(recipe.read_text().replace("'}", f"', sha256: {sha256_file(onnx)}}}"))
    pinned = cli("build", recipe, "-o", tmp_path / "OUT")
    assert pinned.exit_code == 0, pinned.stderr
    assert (tmp_path / "OUT" / "scaler" / "1" / "model.onnx").read_bytes() == onnx.read_bytes()


def test_one_is_url_for_every_caller():
    import tritonbuild.backends.common as common
    from tritonbuild.core.stores import is_url

    assert not hasattr(common, "is_url")
    assert (
        is_url("file:///models/a.onnx")
        and is_url("s3://bucket/a.onnx")
        and not is_url("/models/a.onnx")
    )
