"""Fixed batch buckets (recipe key batch_buckets) make a batch-variant model batch-invariant by construction:
the Python backend's generated wrapper (backends/models/bucketed.py) in the embedded tritonserver, and the
TorchScript export's generated wrapper in torch, each checked by verify's own batch-composition check (a
batch of the goldens sent at once, and concurrent requests the dynamic batcher merges)."""

from __future__ import annotations

import json

import pytest

# The answer depends on how many rows the model computed together: y = 2x + (rows - 1) (a GEMM whose kernel
# depends on M, or a batch statistic, in the small).
PY_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        xs = [pb_utils.get_input_tensor_by_name(r, "X").as_numpy() for r in requests]
        rows = sum(x.shape[0] for x in xs)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", (2 * x + (rows - 1)).astype(np.float32))])
                for x in xs]
"""

PY_RECIPE = """
name: rows
version: 1
backend: python
source: {path: model.py}
max_batch_size: 8
batching: {max_queue_delay_us: 20000}
inputs: [{name: X, dtype: fp32, dims: [4]}]
outputs: [{name: Y, dtype: fp32, dims: [4]}]
verify: {goldens: goldens/rows.npz, samples: 4, repeats: 2, batch_invariance: require}
"""


def _record(cli, tmp_path, recipe_text: str, name: str) -> tuple[int, dict]:
    recipe = tmp_path / f"{name}.yaml"
    recipe.write_text(recipe_text.replace("goldens/rows.npz", f"goldens/{name}.npz"))
    out = tmp_path / f"OUT-{name}"
    assert cli("build", recipe, "-o", out).exit_code == 0
    result = cli("verify", out, "--record", "--json")
    report = json.loads(result.stdout[result.stdout.index("{") :])
    return result.exit_code, report["models"][0]


@pytest.mark.triton
def test_python_wrapper_pads_to_one_bucket_and_the_model_becomes_invariant(
    cli, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.py").write_text(PY_MODEL)
    code, model = _record(cli, tmp_path, PY_RECIPE, "plain")
    assert code == 6 and model["batch_invariance"] == "variant"  # without buckets: fails
    code, model = _record(cli, tmp_path, PY_RECIPE + "batch_buckets: [8]\n", "bucketed")
    assert code == 0, model
    assert model["batch_invariance"] == "invariant"
    version = tmp_path / "OUT-bucketed" / "rows" / "1"
    assert sorted(p.name for p in version.iterdir() if p.suffix == ".py") == [
        "model.py",
        "user_model.py",
    ]
    assert (version / "user_model.py").read_text() == PY_MODEL
    config = (tmp_path / "OUT-bucketed" / "rows" / "config.pbtxt").read_text()
    assert 'key: "tritonbuild_batch_buckets"' in config and 'string_value: "8"' in config
    # every row was computed in a batch of 8: y = 2x + 7, alone or batched
    import numpy as np

    goldens = np.load(tmp_path / "goldens" / "bucketed.npz")
    x = next(goldens[k] for k in goldens.files if "X" in k)
    y = next(goldens[k] for k in goldens.files if "Y" in k)
    assert np.array_equal(y, 2 * x + 7)


@pytest.mark.triton
def test_several_buckets_are_invariant_only_where_the_model_agrees_across_them(
    cli, tmp_path, monkeypatch
):
    """Two buckets: a batch of one computes at 2 rows, the goldens sent together at 4: this model's answers
    differ between those shapes, and verify says so (buckets are by construction only with one)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.py").write_text(PY_MODEL)
    code, model = _record(cli, tmp_path, PY_RECIPE + "batch_buckets: [2, 8]\n", "two")
    assert code == 6 and model["batch_invariance"] == "variant"


EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[2] / "recipes" / "examples"


@pytest.mark.slow
def test_torchscript_export_pads_to_one_bucket_and_the_example_embedder_becomes_invariant(
    cli, tmp_path, monkeypatch
):
    """The examples' image-embedder (conv + linear, traced) changes its bits with the batch it computes in (the
    CPU GEMM blocks by M); exported with batch_buckets [4] it computes every batch at 4 rows."""
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "embedder.py").write_text((EXAMPLES / "embedder.py").read_text())
    recipe = (
        (EXAMPLES / "image-embedder.yaml")
        .read_text()
        .replace("batch_invariance: report", "batch_invariance: require")
    )
    code, model = _record(
        cli, tmp_path, recipe.replace("goldens/image-embedder.npz", "goldens/rows.npz"), "plain"
    )
    assert code == 6 and model["batch_invariance"] == "variant", model
    code, model = _record(
        cli,
        tmp_path,
        recipe.replace("goldens/image-embedder.npz", "goldens/rows.npz") + "batch_buckets: [4]\n",
        "bucketed",
    )
    assert code == 0 and model["batch_invariance"] == "invariant", model
    assert model["route"] == "in-process"
    # the generated wrapper is part of the exported archive, and the export is reproducible byte for byte
    import zipfile

    pt = tmp_path / "OUT-bucketed" / "image-embedder" / "1" / "model.pt"
    assert any("tritonbuild_buckets" in name for name in zipfile.ZipFile(pt).namelist())
    again = tmp_path / "OUT-again"
    assert (
        cli(
            "build", tmp_path / "bucketed.yaml", "-o", again, "--cache-dir", tmp_path / "cache2"
        ).exit_code
        == 0
    )
    assert (again / "image-embedder" / "1" / "model.pt").read_bytes() == pt.read_bytes()
