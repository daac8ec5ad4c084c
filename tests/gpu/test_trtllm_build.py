"""A real engine build: runs only where TensorRT-LLM imports and a GPU is present (the NGC TRT-LLM image on a
GPU runner). Everywhere else it skips itself; CI never has a GPU.

The checkpoint is the example's generator at head_dim 64: TensorRT-LLM's decoder masked-MHA kernels exist for
head sizes 32/48/64/80/96/104/112/128/144/160/192/224/256 only (the example's head_dim 16 builds but cannot
generate)."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

from tests.conftest import EXAMPLES, llmapi_recipe

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        importlib.util.find_spec("tensorrt_llm") is None, reason="tensorrt_llm is not installed"
    ),
]
HEAD_DIM_64 = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
}


def _checkpoint(dest):
    spec = importlib.util.spec_from_file_location(
        "mk", EXAMPLES / "tiny-llama" / "make_checkpoint.py"
    )
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    cfg = {**mk.CONFIG, **HEAD_DIM_64}
    dest.mkdir()
    (dest / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True))
    mk.write_safetensors(dest / "model.safetensors", mk.tensors(cfg))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(EXAMPLES / "tiny-llama" / name, dest / name)


@pytest.mark.parametrize("build_path", ["cli", "llmapi"])
def test_int4_engine_builds_and_generates(cli, tmp_path, build_path):
    import tensorrt_llm

    _checkpoint(tmp_path / "tiny-llama")
    text = (EXAMPLES / "tiny-llama-int4.yaml").read_text()
    # the installed TensorRT-LLM, declared as a custom image's (an NGC tag must match the version table)
    text = text.replace('trtllm_version: "1.1.0"', f'trtllm_version: "{tensorrt_llm.__version__}"')
    text = text.replace(
        "nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3", "local/triton-trtllm:test"
    )
    text = text.replace(
        "  use_paged_context_fmha: true",
        f"  use_paged_context_fmha: true\n  build_path: {build_path}",
    )
    (tmp_path / "llm.yaml").write_text(text)
    out = tmp_path / "OUT"
    r = cli("build", tmp_path / "llm.yaml", "-o", out, "--strict", "--json")
    assert r.exit_code == 0, r.stderr
    steps = {s["kind"]: s for s in json.loads(r.stdout)["models"][0]["steps"]}
    assert steps["trtllm.engine"]["status"] == "built"
    engine = out / "tiny-llama_tensorrt_llm" / "1" / "engine"
    cfg = json.loads((engine / "config.json").read_text())
    assert cfg["pretrained_config"]["quantization"]["quant_algo"] == "W4A16"
    assert cfg["pretrained_config"]["head_size"] == 64
    assert (engine / "rank0.engine").stat().st_size > 0
    from tensorrt_llm import SamplingParams
    from tensorrt_llm._tensorrt_engine import LLM

    llm = LLM(model=str(engine), tokenizer=str(tmp_path / "tiny-llama"))
    try:
        (result,) = llm.generate(["Triton serves models"], SamplingParams(max_tokens=8))
        assert (
            len(result.outputs[0].token_ids) >= 1
        )  # random weights: any tokens, but generated on the GPU
    finally:
        llm.shutdown()


def test_llmapi_route_quantizes_w4a16_awq_with_modelopt(cli, tmp_path):
    """runtime auto + int4_awq: the LLM-API route; ModelOpt's quantize.py exports a W4A16-AWQ Hugging Face
    checkpoint (hf_quant_config.json) that the generated model.yaml points at."""
    _checkpoint(tmp_path / "tiny-llama")
    text = llmapi_recipe(
        (EXAMPLES / "tiny-llama-int4.yaml")
        .read_text()
        .replace("quantization: int4_weight_only", "quantization: int4_awq")
    )
    (tmp_path / "r.yaml").write_text(text)
    r = cli("build", tmp_path / "r.yaml", "-o", tmp_path / "OUT", "--strict")
    assert r.exit_code == 0, r.stderr
    quant = json.loads(
        (tmp_path / "OUT" / "tiny-llama" / "1" / "checkpoint" / "hf_quant_config.json").read_text()
    )
    assert quant["quantization"]["quant_algo"] == "W4A16_AWQ"


def test_int8_weight_only_engine_records_upstreams_w8a16(cli, tmp_path):
    """int8_weight_only: the converter's --weight_only_precision int8; the engine records W8A16
    (facts/trtllm_quantization.json weight_only) and assembles against the recipe."""
    import tensorrt_llm

    from tests.contracts.facts import load

    _checkpoint(tmp_path / "tiny-llama")
    text = (EXAMPLES / "tiny-llama-int4.yaml").read_text()
    text = text.replace('trtllm_version: "1.1.0"', f'trtllm_version: "{tensorrt_llm.__version__}"')
    text = text.replace(
        "nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3", "local/triton-trtllm:test"
    )
    (tmp_path / "llm.yaml").write_text(
        text.replace("quantization: int4_weight_only", "quantization: int8_weight_only")
    )
    out = tmp_path / "OUT"
    r = cli("build", tmp_path / "llm.yaml", "-o", out, "--strict")
    assert r.exit_code == 0, r.stderr
    cfg = json.loads((out / "tiny-llama_tensorrt_llm" / "1" / "engine" / "config.json").read_text())
    want = load("trtllm_quantization")["weight_only"]["quant_algo"]["int8"]
    assert cfg["pretrained_config"]["quantization"]["quant_algo"] == want
