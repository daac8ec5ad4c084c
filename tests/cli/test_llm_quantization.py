"""LLM quantization end to end on this machine: checkpoints already quantized (AutoAWQ, GPTQ) planned and assembled
as what they are, formats refused where the GPU or route lacks them (facts: trtllm_quantization.json)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import EXAMPLES, ROOT, route_recipe
from tests.contracts.facts import load
from tritonbuild.backends.llm.memory import Architecture
from tritonbuild.backends.tensorrtllm.memory import weight_bytes

ENGINE = ROOT / "tests" / "fixtures" / "engines" / "tiny-llama-w4a16"
FACTS = load("trtllm_quantization")
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": True, "version": "gemm"}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False, "sym": True}


@pytest.fixture
def llm_dir(tmp_path):
    shutil.copytree(EXAMPLES / "tiny-llama", tmp_path / "tiny-llama")
    shutil.copy(EXAMPLES / "tiny-llama-int4.yaml", tmp_path / "llm.yaml")
    return tmp_path


def _quantized(llm_dir, quantization_config: dict | None, recipe: str) -> dict:
    """The tiny checkpoint with a quantization_config in its config.json; the recipe set to `recipe` lines."""
    path = llm_dir / "tiny-llama" / "config.json"
    config = json.loads(path.read_text())
    if quantization_config is not None:
        config["quantization_config"] = quantization_config
        path.write_text(json.dumps(config))
    text = (llm_dir / "llm.yaml").read_text()
    (llm_dir / "llm.yaml").write_text(
        route_recipe(text.replace("quantization: int4_weight_only", recipe))
    )
    return config


def _plan(cli, llm_dir) -> dict:
    r = cli("plan", llm_dir / "llm.yaml", "--json")
    assert r.exit_code == 0, r.stderr
    (m,) = json.loads(r.stdout)["models"]
    return m


@pytest.mark.parametrize(
    "quantization_config, recipe, zero_point",
    [
        (AWQ, "quantization: int4_awq\nruntime: engine", True),
        (GPTQ, "quantization: int4_gptq", True),
    ],
)
def test_a_prequantized_checkpoint_plans_as_itself_on_the_engine_route(
    cli, llm_dir, quantization_config, recipe, zero_point
):
    """No mismatch error, no ModelOpt re-quantization; the memory plan uses the checkpoint's group size."""
    config = _quantized(llm_dir, quantization_config, recipe)
    m = _plan(cli, llm_dir)
    assert m["extras"]["route"]["name"] == "TensorRT engine (runtime: engine)"
    (engine,) = [s for s in m["steps"] if s["kind"] == "trtllm.engine"]
    assert engine["params"]["checkpoint_quantization"] == {
        "source": quantization_config["quant_method"],
        "group_size": quantization_config["group_size"],
        "zero_point": quantization_config["quant_method"] == "awq",
    }
    arch = Architecture.from_hf_config(config)
    fmt = recipe.split()[1]
    want = weight_bytes(arch, fmt, quantization_config["group_size"], zero_point)[1]
    assert m["extras"]["memory_plan"]["weight_bytes"] == want
    assert want != weight_bytes(arch, fmt, 128, zero_point)[1]  # the group size mattered


def test_the_converter_reads_the_prequantized_checkpoint_without_quantization_flags(
    cli, llm_dir, monkeypatch
):
    from tests.contracts.test_trtllm_argv import SCRIPTS, _check_flags
    from tritonbuild.backends.tensorrtllm import argv as cmd
    from tritonbuild.backends.tensorrtllm.run import engine_view

    monkeypatch.setenv("TRITONBUILD_TRTLLM_EXAMPLES", "/x/examples")
    _quantized(llm_dir, AWQ, "quantization: int4_awq\nruntime: engine")
    (engine,) = [s for s in _plan(cli, llm_dir)["steps"] if s["kind"] == "trtllm.engine"]
    p = engine["params"]
    argv = cmd.convert_argv(
        engine_view(p), p["model_type"], "/ckpt", "/out", prequant=p["checkpoint_quantization"]
    )
    assert argv[1] == "/x/" + SCRIPTS["llama"]["source"]["path"]  # the converter, not quantize.py
    seen = _check_flags(argv[2:], SCRIPTS["llama"], "awq")
    assert not {"--use_weight_only", "--weight_only_precision", "--smoothquant", "--qformat"} & set(
        seen
    )
    assert "llama" in FACTS["converters_read_quantization_config"]["scripts"]


def test_an_engine_built_from_an_autoawq_checkpoint_assembles_as_int4_awq(cli, llm_dir, tmp_path):
    """The converters record an AutoAWQ checkpoint as W4A16_GPTQ: the engine check expects that, not W4A16_AWQ."""
    _quantized(llm_dir, AWQ, "quantization: int4_awq\nruntime: engine")
    engine = tmp_path / "engine"
    shutil.copytree(ENGINE, engine)
    cfg = json.loads((engine / "config.json").read_text())
    algo = FACTS["converters_read_quantization_config"]["quant_method"]["awq"]["quant_algo"]
    cfg["pretrained_config"]["quantization"].update(
        quant_algo=algo, group_size=64, has_zero_point=True
    )
    (engine / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "OUT"
    r = cli("build", llm_dir / "llm.yaml", "-o", out, "--engine", f"tiny-llama={engine}")
    assert r.exit_code == 0, r.stderr
    manifest = json.loads((out / "tritonbuild-manifest.json").read_text())
    assert any(m["name"] == "tiny-llama_tensorrt_llm" for m in manifest["models"])
    cfg["pretrained_config"]["quantization"]["quant_algo"] = (
        "W4A16_AWQ"  # a ModelOpt engine is not this checkpoint's
    )
    (engine / "config.json").write_text(json.dumps(cfg))
    r = cli(
        "build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT2", "--engine", f"tiny-llama={engine}"
    )
    assert (
        r.exit_code == 5
        and "engine quantization 'W4A16_AWQ'" in r.stderr
        and "W4A16_GPTQ" in r.stderr
    )


@pytest.mark.parametrize(
    "quantization_config, recipe, key, words",
    [
        (AWQ, "quantization: int4_awq\nruntime: pytorch", "runtime", "set runtime: engine"),
        ({**GPTQ, "desc_act": True}, "quantization: int4_gptq", "runtime", "desc_act=True"),
        (None, "quantization: int4_gptq", "quantization", "is not quantized"),
        (
            GPTQ,
            "quantization: int4_awq\nruntime: engine",
            "quantization",
            "set quantization: int4_gptq",
        ),
        (None, "quantization: nvfp4", "quantization", "SM 100"),
        (None, "quantization: int8_sq\nruntime: pytorch", "quantization", "use runtime: engine"),
        (
            {"quant_method": "fp8"},
            "quantization: fp8\nruntime: pytorch",
            "runtime",
            "neither route reads",
        ),
        (
            {"quant_method": "fp8", "weight_block_size": [128, 128]},
            "quantization: fp8\nruntime: engine",
            "runtime",
            "set runtime: pytorch",
        ),
    ],
)
def test_a_quantization_the_route_or_gpu_cannot_take_is_a_recipe_error(
    cli, llm_dir, quantization_config, recipe, key, words
):
    _quantized(llm_dir, quantization_config, recipe)
    r = cli("plan", llm_dir / "llm.yaml")
    assert r.exit_code == 3, r.stderr
    assert (
        words in r.stderr
        and "llm.yaml:" in r.stderr
        and key in r.stderr
        and "Traceback" not in r.stderr
    )


def test_an_fp8_block_checkpoint_plans_on_the_llm_api_route_of_a_gpu_that_has_its_kernels(
    cli, llm_dir
):
    _quantized(
        llm_dir,
        {"quant_method": "fp8", "weight_block_size": [128, 128]},
        "quantization: fp8\nruntime: pytorch",
    )
    assert [s["kind"] for s in _plan(cli, llm_dir)["steps"]] == ["trtllm.checkpoint"]
    text = (llm_dir / "llm.yaml").read_text()
    (llm_dir / "llm.yaml").write_text(text.replace("gpu: H200", "gpu: L40S"))
    r = cli("plan", llm_dir / "llm.yaml")
    assert (
        r.exit_code == 3
        and "L40S (Ada) has no FP8 block-scaling kernels" in r.stderr
        and "llm.yaml:" in r.stderr
    )


def test_smoothquant_plans_on_the_engine_route(cli, llm_dir):
    _quantized(llm_dir, None, "quantization: int8_sq_per_channel_per_token")
    m = _plan(cli, llm_dir)
    assert m["extras"]["route"]["name"] == "TensorRT engine (runtime: engine)"
    (engine,) = [s for s in m["steps"] if s["kind"] == "trtllm.engine"]
    assert engine["params"]["quantization"] == "int8_sq_per_channel_per_token"


def test_an_unreadable_quantization_description_is_a_plan_error(cli, llm_dir):
    _quantized(llm_dir, None, "quantization: int4_awq\nruntime: pytorch")
    (llm_dir / "tiny-llama" / "hf_quant_config.json").write_text("{not json")
    r = cli("plan", llm_dir / "llm.yaml")
    assert r.exit_code == 4 and "cannot be read" in r.stderr and "Traceback" not in r.stderr, (
        r.stderr
    )
