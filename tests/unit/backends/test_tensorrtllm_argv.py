"""Values tritonbuild chooses in its command lines (AWQ block and calibration sizes, every trtllm-build limit, the
LLM-API spec). Whether each flag exists and takes that value is tests/contracts/test_trtllm_argv.py's job, against
TensorRT-LLM's recorded argparse sets, over the whole family × quantization × KV matrix."""

from __future__ import annotations

import pytest

from tritonbuild.backends.tensorrtllm import argv as cmd
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe


@pytest.fixture(autouse=True)
def _examples(monkeypatch):
    monkeypatch.setenv("TRITONBUILD_TRTLLM_EXAMPLES", "/app/tensorrt_llm/examples")


def _recipe(**kw) -> LLMRecipe:
    return LLMRecipe(name="m", version=1, backend="tensorrtllm", checkpoint={"path": "c"}, **kw)


def test_awq_goes_through_modelopt():
    r = _recipe(quantization="int4_awq")
    assert cmd.convert_argv(r, "llama", "/ckpt", "/out") == [
        "python3",
        "/app/tensorrt_llm/examples/quantization/quantize.py",
        "--model_dir",
        "/ckpt",
        "--dtype",
        "auto",
        "--output_dir",
        "/out",
        "--qformat",
        "int4_awq",
        "--awq_block_size",
        "128",
        "--calib_size",
        "32",
        "--tp_size",
        "1",
        "--pp_size",
        "1",
    ]


def test_fp8_with_fp8_kv_cache():
    r = _recipe(quantization="fp8", kv_cache={"dtype": "fp8"})
    argv = cmd.convert_argv(r, "llama", "/ckpt", "/out")
    assert (
        argv[argv.index("--qformat") + 1] == "fp8"
        and argv[argv.index("--kv_cache_dtype") + 1] == "fp8"
    )


def test_unknown_architecture_has_no_converter():
    with pytest.raises(KeyError):
        cmd.convert_argv(_recipe(), "mamba", "/ckpt", "/out")


def test_trtllm_build_spells_out_every_limit():
    r = _recipe(
        engine={
            "max_batch_size": 32,
            "max_input_len": 2048,
            "max_seq_len": 4096,
            "max_num_tokens": 8192,
            "use_paged_context_fmha": False,
        },
        kv_cache={"tokens_per_block": 128},
    )
    assert cmd.build_argv(r, "/ckpt", "/engine", "/cache/t.cache") == [
        "trtllm-build",
        "--checkpoint_dir",
        "/ckpt",
        "--output_dir",
        "/engine",
        "--gemm_plugin",
        "auto",
        "--gpt_attention_plugin",
        "auto",
        "--kv_cache_type",
        "paged",
        "--remove_input_padding",
        "enable",
        "--context_fmha",
        "enable",
        "--use_paged_context_fmha",
        "disable",
        "--tokens_per_block",
        "128",
        "--max_batch_size",
        "32",
        "--max_input_len",
        "2048",
        "--max_seq_len",
        "4096",
        "--max_num_tokens",
        "8192",
        "--max_beam_width",
        "1",
        "--logits_dtype",
        "float32",
        "--workers",
        "1",
        "--input_timing_cache",
        "/cache/t.cache",
        "--output_timing_cache",
        "/cache/t.cache",
    ]


def test_llmapi_spec_maps_quantization_to_quant_algo():
    spec = cmd.llmapi_spec(
        _recipe(quantization="int4_weight_only", engine={"build_path": "llmapi"}), "/c", "/e"
    )
    assert spec["quant_algo"] == "W4A16" and spec["kv_cache_quant_algo"] is None
    assert spec["build_config"] == {
        "max_batch_size": 64,
        "max_input_len": 1024,
        "max_seq_len": 2048,
        "max_num_tokens": 8192,
        "max_beam_width": 1,
    }
    assert (
        cmd.llmapi_spec(_recipe(quantization="int4_awq"), "/c", "/e")["quant_algo"] == "W4A16_AWQ"
    )
    assert cmd.llmapi_spec(_recipe(quantization="none"), "/c", "/e")["quant_algo"] is None
