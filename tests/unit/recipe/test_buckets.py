"""batch_buckets in a recipe: the rules (ascending, a batching model, the largest holding max_batch_size) and
which backends honour them (the Python backend's wrapper, the TorchScript export; every other backend refuses
them at load, naming the key)."""

from __future__ import annotations

import pytest

from tests.conftest import PY_RECIPE
from tritonbuild.backends import REGISTRY
from tritonbuild.errors import MultipleErrors, TritonBuildError
from tritonbuild.recipe.load import load_recipe


def _errors(path) -> list:
    with pytest.raises(TritonBuildError) as info:
        load_recipe(path, REGISTRY.recipe_kinds())
    error = info.value
    return error.errors if isinstance(error, MultipleErrors) else [error]


def test_python_recipe_with_buckets_loads(write):
    (write("model.py", "x = 1\n"))
    loaded = load_recipe(
        write("r.yaml", PY_RECIPE + "batch_buckets: [1, 4]\n"), REGISTRY.recipe_kinds()
    )
    assert loaded.recipe.batch_buckets == [1, 4]


@pytest.mark.parametrize(
    ("buckets", "says"),
    [
        ("[4, 1]", "not strictly ascending"),
        ("[2, 2, 4]", "not strictly ascending"),
        ("[1, 2]", "the largest bucket 2 is below max_batch_size 4"),
    ],
)
def test_bucket_rules_name_the_key(write, buckets, says):
    (error,) = _errors(write("r.yaml", PY_RECIPE + f"batch_buckets: {buckets}\n"))
    assert says in error.message and "batch_buckets" in error.message
    assert error.where.endswith(":9")


def test_buckets_on_a_model_that_does_not_batch(write):
    (error,) = _errors(
        write(
            "r.yaml",
            PY_RECIPE.replace("max_batch_size: 4", "max_batch_size: 0") + "batch_buckets: [4]\n",
        )
    )
    assert "does not batch" in error.message


ONNX = """
name: scaler
version: 1
backend: onnxruntime
source: {path: model.onnx}
max_batch_size: 4
batch_buckets: [4]
"""


def test_a_backend_that_does_not_generate_buckets_refuses_them(write):
    """Only the Python and PyTorch recipe types declare the key; ONNX Runtime (like TensorRT, TensorRT-LLM, vLLM)
    refuses it with file:line."""
    write("model.onnx", "not read at load")
    (error,) = _errors(write("r.yaml", ONNX))
    assert error.message.startswith("batch_buckets: unknown key") and error.where.endswith(":6")


TORCH = """
name: t
version: 1
backend: pytorch
source:
  export: {{module: "mods:build", inputs: {{x: {{dtype: fp32, shape: [2, 4]}}}}, outputs: [y], format: {fmt}}}
max_batch_size: 4
batch_buckets: [4]
"""


def test_pytorch_honours_buckets_in_torchscript_exports_only(write):
    write("mods.py", "def build():\n    pass\n")
    loaded = load_recipe(write("ts.yaml", TORCH.format(fmt="torchscript")), REGISTRY.recipe_kinds())
    assert loaded.recipe.batch_buckets == [4]
    (error,) = _errors(write("aoti.yaml", TORCH.format(fmt="aoti")))
    assert "not into a saved file or an AOTInductor package" in error.message
