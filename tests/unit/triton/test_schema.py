"""ModelConfig comes from tritonclient's own schema, without its grpc import or its protobuf runtime check."""

import subprocess
import sys

from google.protobuf import text_format

from tritonbuild.triton.schema import model_config_pb2


def test_schema_is_tritonclients_descriptor_byte_for_byte():
    from tritonclient.grpc import model_config_pb2 as upstream

    ours = model_config_pb2()
    assert ours.DESCRIPTOR.serialized_pb == upstream.DESCRIPTOR.serialized_pb
    assert set(upstream.DESCRIPTOR.message_types_by_name) <= set(vars(ours))


def test_messages_print_and_parse_like_upstream():
    from tritonclient.grpc import model_config_pb2 as upstream

    pb2 = model_config_pb2()
    mc = pb2.ModelConfig(name="m", max_batch_size=8)
    t = mc.input.add(name="X", data_type=pb2.DataType.Value("TYPE_FP32"))
    t.dims.extend([16])
    mc.instance_group.add(kind=pb2.ModelInstanceGroup.Kind.Value("KIND_CPU"), count=2)
    text = text_format.MessageToString(mc)
    assert text == text_format.MessageToString(text_format.Parse(text, upstream.ModelConfig()))
    assert text_format.Parse(text, pb2.ModelConfig()) == mc


def test_loading_the_schema_imports_no_grpc():
    code = (
        "import sys; from tritonbuild.triton.schema import model_config_pb2; model_config_pb2(); "
        "print(sorted(m for m in sys.modules if m.startswith(('grpc', 'tritonclient.grpc'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
