"""triton/config.py writes tensors without knowing the recipe: its dtype rule agrees with Triton's enum."""

from typing import get_args

from tritonbuild.recipe.models import DTYPES, DType, TensorSpec
from tritonbuild.triton.config import add_tensors, data_type, model_config_pb2, parse, render


def test_every_recipe_dtype_is_a_triton_data_type():
    pb2 = model_config_pb2()
    for dtype in get_args(DType):
        assert pb2.DataType.Value(data_type(dtype)) != pb2.DataType.Value("TYPE_INVALID"), dtype
        assert data_type(dtype) == DTYPES[dtype], dtype


def test_tensors_from_recipe_specs_round_trip():
    pb2 = model_config_pb2()
    mc = pb2.ModelConfig(name="m")
    add_tensors(
        mc.input, [TensorSpec(name="x", dtype="bytes", dims=[-1], optional=True)], pb2, True
    )
    add_tensors(mc.output, [TensorSpec(name="y", dtype="bf16", dims=[2, 3])], pb2, False)
    back = parse(render(mc))
    assert (back.input[0].data_type, back.input[0].optional) == (
        pb2.DataType.Value("TYPE_STRING"),
        True,
    )
    assert (back.output[0].data_type, list(back.output[0].dims)) == (
        pb2.DataType.Value("TYPE_BF16"),
        [2, 3],
    )
