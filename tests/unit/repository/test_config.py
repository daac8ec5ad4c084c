"""config.pbtxt golden files per backend, reviewed like code; every file parses back as ModelConfig."""

from __future__ import annotations

import pytest

from tests.conftest import EXAMPLES, ROOT
from tritonbuild.backends import REGISTRY, backend_for
from tritonbuild.recipe.load import load_recipe
from tritonbuild.recipe.models import TensorSpec
from tritonbuild.repository.config import build_model_config
from tritonbuild.triton.config import parse, render

GOLDEN = ROOT / "tests" / "fixtures" / "configs"


@pytest.mark.parametrize(
    "backend, recipe, io",
    [
        ("python", "risk-scorer.yaml", None),
        (
            "onnxruntime",
            "text-encoder.yaml",
            (
                [TensorSpec(name="ids", dtype="int64", dims=[16])],
                [TensorSpec(name="embedding", dtype="fp32", dims=[16])],
            ),
        ),
        ("pytorch", "image-embedder.yaml", None),
    ],
)
def test_config_matches_golden(backend, recipe, io):
    if (
        backend == "pytorch"
    ):  # derived from the traced module; the golden was written from a real build
        io = (
            [TensorSpec(name="pixels__0", dtype="fp32", dims=[3, 8, 8])],
            [TensorSpec(name="embedding__0", dtype="fp32", dims=[8])],
        )
    r = load_recipe(EXAMPLES / recipe, REGISTRY.recipe_kinds()).recipe
    inputs, outputs = io or (r.inputs, r.outputs)
    data = render(build_model_config(r, inputs, outputs, backend_for(backend)))
    assert data == (GOLDEN / f"{backend}.pbtxt").read_bytes()
    assert parse(data).name == r.name


def test_max_batch_size_zero_is_written_and_policies_render(py_recipe, write):
    text = py_recipe.read_text().replace("max_batch_size: 4", "max_batch_size: 0")
    text += "version_policy: {specific: [1, 3]}\nparameters: {EXECUTION_ENV_PATH: env.tar.gz}\n"
    r = load_recipe(write("r.yaml", text), REGISTRY.recipe_kinds()).recipe
    data = render(build_model_config(r, r.inputs, r.outputs, backend_for("python")))
    assert b"max_batch_size: 0\n" in data
    mc = parse(data)
    assert list(mc.version_policy.specific.versions) == [1, 3]
    assert mc.parameters["EXECUTION_ENV_PATH"].string_value == "env.tar.gz"


def test_queue_policy_and_priorities(py_recipe, write):
    text = (
        py_recipe.read_text()
        + """batching:
  preferred_batch_sizes: [2, 4]
  max_queue_delay_us: 250
  priority_levels: 2
  default_priority_level: 1
  default_queue_policy: {timeout_action: delay, default_timeout_us: 1000, max_queue_size: 16}
  priority_queue_policy:
    2: {timeout_action: reject, max_queue_size: 4}
"""
    )
    r = load_recipe(write("r.yaml", text), REGISTRY.recipe_kinds()).recipe
    mc = parse(render(build_model_config(r, r.inputs, r.outputs, backend_for("python"))))
    db = mc.dynamic_batching
    assert list(db.preferred_batch_size) == [2, 4] and db.max_queue_delay_microseconds == 250
    assert db.default_queue_policy.timeout_action == 1  # DELAY
    assert db.priority_queue_policy[2].max_queue_size == 4


def test_parse_rejects_misspelled_field():
    from google.protobuf import text_format

    with pytest.raises(text_format.ParseError, match="max_batch_szie"):
        parse(b'name: "m"\nmax_batch_szie: 4\n')
