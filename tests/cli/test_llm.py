"""LLM recipes end to end on this machine: plan (memory), build (skip / --engine), configs, bad input."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from tests.conftest import EXAMPLES, ROOT, llmapi_recipe, route_recipe
from tests.contracts.facts import load
from tritonbuild.triton.config import parse

ENGINE = ROOT / "tests" / "fixtures" / "engines" / "tiny-llama-w4a16"
LORA_ENGINE = (
    ROOT / "tests" / "fixtures" / "engines" / "tiny-llama-w4a16-lora"
)  # built with the LoRA plugin
GOLDEN = ROOT / "tests" / "fixtures" / "configs" / "llm"
GROUP = [
    "tiny-llama",
    "tiny-llama_bls",
    "tiny-llama_postprocessing",
    "tiny-llama_preprocessing",
    "tiny-llama_tensorrt_llm",
]


@pytest.fixture
def llm_dir(tmp_path):
    """A copy of the example recipe and its tiny checkpoint, free to edit."""
    shutil.copytree(EXAMPLES / "tiny-llama", tmp_path / "tiny-llama")
    shutil.copy(EXAMPLES / "tiny-llama-int4.yaml", tmp_path / "llm.yaml")
    return tmp_path


def _edit(path, old, new, llmapi: bool = False):
    """Replace old by new; llmapi (or new asking for runtime: pytorch): without the example's engine-route serving
    keys, which the LLM-API route refuses."""
    text = path.read_text()
    assert old in text
    text = text.replace(old, new)
    path.write_text(llmapi_recipe(text) if llmapi or "runtime: pytorch" in new else text)


def test_plan_shows_the_memory_plan(cli, llm_dir):
    r = cli("plan", llm_dir / "llm.yaml", "--json")
    assert r.exit_code == 0
    (m,) = json.loads(r.stdout)["models"]
    mem = m["extras"]["memory_plan"]
    assert mem["kv_bytes_per_token"] == 2 * 2 * 2 * 16 * 2 and mem["gpu"] == "H200" and mem["fits"]
    human = cli("plan", llm_dir / "llm.yaml").stdout
    assert "GPU memory plan (H200, 140.4 GiB)" in human and "KV cache per token" in human


@pytest.mark.slow
def test_build_without_trtllm_skips_the_engine_and_exits_0(cli, tmp_path, in_root):
    out = tmp_path / "OUT"
    r = cli("build", "recipes/examples", "-o", out, "--json")
    assert r.exit_code == 0, r.stderr
    steps = {(m["name"], s["kind"]): s for m in json.loads(r.stdout)["models"] for s in m["steps"]}
    engine = steps[("tiny-llama", "trtllm.engine")]
    assert (
        engine["status"] == "skipped"
        and "TensorRT-LLM and a GPU are not available here" in engine["reason"]
    )
    assert not any(p.name.startswith("tiny-llama") for p in out.iterdir())
    strict = cli("build", "recipes/examples", "-o", tmp_path / "S", "--strict")
    assert strict.exit_code == 5 and "skipped" in strict.stderr and not (tmp_path / "S").exists()


@pytest.mark.slow
def test_assembled_around_a_fixture_engine_matches_golden_configs(cli, tmp_path, in_root):
    out = tmp_path / "OUT"
    r = cli(
        "build",
        "recipes/examples/tiny-llama-int4.yaml",
        "-o",
        out,
        "--engine",
        f"tiny-llama={ENGINE}",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == GROUP
    for name in GROUP:
        data = (out / name / "config.pbtxt").read_bytes()
        assert parse(data).name == name
        assert data == (GOLDEN / f"{name}.pbtxt").read_bytes(), name
        assert b"${" not in data
    manifest = json.loads((out / "tritonbuild-manifest.json").read_text())
    llm = {m["name"]: m["llm"] for m in manifest["models"]}["tiny-llama_tensorrt_llm"]
    assert llm["quant_algo"] == "W4A16" and llm["trtllm_version"] == "1.1.0"
    assert llm["engine_path"] == "/models/tiny-llama_tensorrt_llm/1/engine"
    assert llm["memory_plan"]["kv_bytes_per_token"] == 256
    report = json.loads(cli("verify", out, "--json").stdout)
    assert all(c["ok"] for c in report["static"]), [c for c in report["static"] if not c["ok"]]
    by = {m["name"]: m for m in report["models"]}
    assert (
        by["tiny-llama_tensorrt_llm"]["path"] == "none"
        and not by["tiny-llama_tensorrt_llm"]["loaded"]
    )
    assert by["tiny-llama_tensorrt_llm"]["checked"] is False


def test_repository_is_relocatable_to_its_mount_path(cli, llm_dir, tmp_path):
    """gpt_model_path is '<repository_mount>/<model>/<v>/engine': mounted there, the engine is found; the
    tokenizers are found relative to each model's directory."""
    mount = tmp_path / "mnt" / "models"
    _edit(llm_dir / "llm.yaml", "repository_mount: /models", f"repository_mount: {mount}")
    built = tmp_path / "built"
    assert (
        cli(
            "build", llm_dir / "llm.yaml", "-o", built, "--engine", f"tiny-llama={ENGINE}"
        ).exit_code
        == 0
    )
    mount.parent.mkdir(parents=True)
    shutil.copytree(built, mount)  # what a volume mount / init-container sync does
    mc = parse((mount / "tiny-llama_tensorrt_llm" / "config.pbtxt").read_bytes())
    engine = mc.parameters["gpt_model_path"].string_value
    assert engine == f"{mount}/tiny-llama_tensorrt_llm/1/engine"
    assert (mount / "tiny-llama_tensorrt_llm/1/engine/config.json").is_file()
    pre = parse((mount / "tiny-llama_preprocessing" / "config.pbtxt").read_bytes())
    tok = pre.parameters["tokenizer_file"].string_value
    assert not tok.startswith("/") and (mount / "tiny-llama_preprocessing/1" / tok).is_file()


@pytest.mark.parametrize(
    "old, new, code, words",
    [
        (
            "max_seq_len: 512",
            "max_seq_len: 128",
            3,
            "engine.max_seq_len: max_seq_len 128 < max_input_len 256",
        ),
        (
            "use_paged_context_fmha: true",
            "use_paged_context_fmha: false",
            3,
            "kv_cache.enable_block_reuse: KV block reuse needs an engine built with paged context FMHA",
        ),
        (
            "repository_mount: /models",
            "repository_mount: /models\n  gpu_device_ids: [0, 1, 2]",
            0,
            None,
        ),
        (
            "quantization: int4_weight_only",
            "quantization: int4_weight_only\nruntime: pytorch",
            3,
            "quantization: int4_weight_only (RTN W4A16) exists only on the TensorRT engine path",
        ),
        ("gpu: H200", "gpu: H300", 3, "unknown GPU 'H300'"),
    ],
)
def test_bad_llm_recipes(cli, llm_dir, tmp_path, old, new, code, words):
    _edit(llm_dir / "llm.yaml", old, new)
    r = cli(
        "build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT", "--engine", f"tiny-llama={ENGINE}"
    )
    if code == 0:  # 3 GPUs for world size 1 is fine; tp 2 over 3 GPUs is not:
        _edit(llm_dir / "llm.yaml", "max_beam_width: 1", "max_beam_width: 1\n  tp_size: 2")
        r = cli("build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT2")
        assert r.exit_code == 3 and "3 GPUs is not a multiple of tp_size × pp_size = 2" in r.stderr
        return
    assert r.exit_code == code, r.stderr
    assert words in r.stderr and "llm.yaml:" in r.stderr
    assert not (tmp_path / "OUT").exists()


def test_checkpoint_without_config_json(cli, llm_dir, tmp_path):
    (llm_dir / "tiny-llama" / "config.json").unlink()
    r = cli("build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT")
    assert r.exit_code == 4 and "has no config.json: not a Hugging Face checkpoint" in r.stderr


def test_tokenizer_dir_without_tokenizer_files(cli, llm_dir, tmp_path):
    (llm_dir / "tok").mkdir()
    (llm_dir / "tok" / "README").write_text("no tokenizer here\n")
    _edit(
        llm_dir / "llm.yaml",
        "checkpoint: {path: tiny-llama}",
        "checkpoint: {path: tiny-llama}\ntokenizer: tok",
    )
    r = cli("build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT")
    assert (
        r.exit_code == 4
        and "has neither tokenizer.json nor a sentencepiece tokenizer.model (found: no "
        "tokenizer files)"
        in r.stderr
    )


def test_engine_from_another_trtllm_version(cli, llm_dir, tmp_path):
    """An image built elsewhere (tensorrtllm_backend's Dockerfile: TensorRT-LLM 1.2.1) is taken at its word; the
    fixture engine (1.1.0) then does not match it."""
    _edit(llm_dir / "llm.yaml", 'trtllm_version: "1.1.0"', 'trtllm_version: "1.2.1"')
    _edit(
        llm_dir / "llm.yaml",
        "nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3",
        "registry.local/triton-trtllm:1.2.1",
    )
    r = cli(
        "build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT", "--engine", f"tiny-llama={ENGINE}"
    )
    assert r.exit_code == 5
    assert "engine built by TensorRT-LLM 1.1.0, the serving image has 1.2.1" in r.stderr
    assert not (tmp_path / "OUT").exists()


def test_ngc_image_without_the_recipes_trtllm_is_a_recipe_error(cli, llm_dir, tmp_path):
    """25.12-trtllm-python-py3 ships TensorRT-LLM 1.1.0 (NVIDIA's compatibility matrix): a 1.2.1 engine would not
    deserialize there, so the recipe is refused before anything is built."""
    _edit(llm_dir / "llm.yaml", 'trtllm_version: "1.1.0"', 'trtllm_version: "1.2.1"')
    r = cli(
        "build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT", "--engine", f"tiny-llama={ENGINE}"
    )
    assert r.exit_code == 3 and "llm.yaml:" in r.stderr
    assert (
        "25.12-trtllm-python-py3 ships TensorRT-LLM 1.1.0, the recipe builds with 1.2.1" in r.stderr
    )
    assert not (tmp_path / "OUT").exists()


def test_checkpoint_pin(cli, llm_dir, tmp_path):
    _edit(
        llm_dir / "llm.yaml",
        "checkpoint: {path: tiny-llama}",
        "checkpoint: {path: tiny-llama, sha256: " + "ab" * 32 + "}",
    )
    r = cli("build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT")
    assert r.exit_code == 4 and "the recipe pins abab" in r.stderr


def test_vllm_target(cli, tmp_path, in_root):
    out = tmp_path / "OUT"
    r = cli("build", "recipes/gpu/tiny-llama-vllm.yaml", "-o", out)
    assert r.exit_code == 0, r.stderr
    mc = parse((out / "tiny-llama-vllm" / "config.pbtxt").read_bytes())
    assert (mc.backend, mc.max_batch_size, mc.model_transaction_policy.decoupled) == (
        "vllm",
        0,
        True,
    )
    assert mc.instance_group[0].kind == type(mc.instance_group[0]).Kind.Value("KIND_MODEL")
    model_json = json.loads((out / "tiny-llama-vllm" / "1" / "model.json").read_text())
    assert model_json == {
        "model": "/models/tiny-llama-vllm/1/model",
        "dtype": "float16",
        "gpu_memory_utilization": 0.5,
        "max_model_len": 512,
        "enforce_eager": True,
        "seed": 0,
        "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1,
        "block_size": 16,
    }
    assert (out / "tiny-llama-vllm" / "1" / "model" / "config.json").is_file()
    report = json.loads(cli("verify", out, "--json").stdout)
    assert all(c["ok"] for c in report["static"])
    assert report["models"][0]["path"] == "none" and report["passed"] is False


def test_llmapi_pytorch_target(cli, llm_dir, tmp_path):
    _edit(
        llm_dir / "llm.yaml",
        "quantization: int4_weight_only",
        "quantization: fp8\nruntime: pytorch",
    )
    out = tmp_path / "OUT"
    r = cli(
        "build", llm_dir / "llm.yaml", "-o", out, "--json"
    )  # not quantized yet: ModelOpt would, on a GPU
    assert r.exit_code == 0
    (m,) = json.loads(r.stdout)["models"]
    assert [(s["kind"], s["status"]) for s in m["steps"]] == [("trtllm.quantize", "skipped")]
    assert not (out / "tiny-llama").exists()
    (llm_dir / "tiny-llama" / "hf_quant_config.json").write_text(
        '{"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}}'
    )
    r = cli("build", llm_dir / "llm.yaml", "-o", out)
    assert r.exit_code == 0, r.stderr
    import yaml

    vdir = out / "tiny-llama" / "1"
    spec = yaml.safe_load((vdir / "model.yaml").read_text())
    assert spec["backend"] == "pytorch" and spec["model"] == "checkpoint"
    assert (
        "quant_config" not in spec
    )  # TorchLlmArgs has none: the LLM API reads hf_quant_config.json
    assert spec["kv_cache_config"] == {
        "free_gpu_memory_fraction": 0.5,
        "enable_block_reuse": True,
        "tokens_per_block": 64,
    }
    assert spec["triton_config"] == {
        "max_batch_size": 0,
        "decoupled": False,
        "exclude_input_in_output": True,
        "add_special_tokens": True,
    }
    assert (vdir / "checkpoint" / "config.json").is_file() and (vdir / "model.py").is_file()
    mc = parse((out / "tiny-llama" / "config.pbtxt").read_bytes())
    assert (mc.backend, mc.max_batch_size) == ("python", 0)
    report = json.loads(cli("verify", out, "--json").stdout)
    checks = {c["check"]: c for c in report["static"]}
    assert checks["llmapi"]["ok"], checks["llmapi"]
    (vdir / "model.yaml").write_text(
        yaml.safe_dump({**spec, "triton_config": {"max_batch_size": 8}})
    )
    from tritonbuild.repository.rules import check_model_dir

    bad = {f.check: f.detail for f in check_model_dir(out / "tiny-llama") if not f.ok}
    assert "triton_config.max_batch_size 8 != config max_batch_size 0" in bad["llmapi"]


def test_verify_reports_an_llm_api_model_it_cannot_run_as_not_checked_here(cli, llm_dir, tmp_path):
    """No TensorRT-LLM here: the LLM-API model's row is 'not checked here' with why, neither FAIL nor PASS; the
    report does not pass (publish refuses it) and says NOT CHECKED, not FAILED."""
    _edit(
        llm_dir / "llm.yaml",
        "quantization: int4_weight_only",
        "quantization: none\nruntime: pytorch",
    )
    out = tmp_path / "OUT"
    assert cli("build", llm_dir / "llm.yaml", "-o", out).exit_code == 0
    r = cli("verify", out)
    assert r.exit_code == 6, r.output
    rows = [
        line
        for line in r.stdout.splitlines()
        if "model=tiny-llama" in line or line.startswith(" tiny-llama ")
    ]
    assert rows and all(
        "not checked here" in row and "FAIL" not in row and "PASS" not in row for row in rows
    ), rows
    assert (
        "needs a GPU server with the python backend" in r.stdout
        or "verify --server URL" in r.stdout
    )
    assert "NOT CHECKED (" in r.stdout and "FAILED" not in r.stdout
    assert "verification incomplete" in r.stderr and "Traceback" not in r.stderr
    report = json.loads(cli("verify", out, "--json").stdout)
    unchecked = [m for m in report["models"] if not m["checked"]]
    assert (
        unchecked
        and all(not m["passed"] and m["notes"] for m in unchecked)
        and report["passed"] is False
    )


# Hugging Face config.json values of the published checkpoints (shapes only; weights stay the tiny example's)
FALCON_7B = {
    "model_type": "falcon",
    "hidden_size": 4544,
    "num_attention_heads": 71,
    "num_hidden_layers": 32,
    "multi_query": True,
    "new_decoder_architecture": False,
    "vocab_size": 65024,
    "bias": False,
}
QWEN25_7B = {
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "num_hidden_layers": 28,
    "vocab_size": 152064,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
}
LLAMA3_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
}


def _checkpoint_with(llm_dir, config: dict) -> None:
    (llm_dir / "tiny-llama" / "config.json").write_text(json.dumps(config))


def _with_tp(llm_dir, tp: int, extra: str = "") -> None:
    text = (
        (llm_dir / "llm.yaml")
        .read_text()
        .replace("max_beam_width: 1", f"max_beam_width: 1\n  tp_size: {tp}")
    )
    text = text.replace(
        "repository_mount: /models",
        f"repository_mount: /models\n  gpu_device_ids: {list(range(tp))}",
    )
    (llm_dir / "llm.yaml").write_text(
        route_recipe(
            text.replace(
                "quantization: int4_weight_only", extra or "quantization: int4_weight_only"
            )
        )
    )


@pytest.mark.parametrize(
    "config, tp, extra, heads",
    [
        (FALCON_7B, 2, "", "falcon's 71 attention heads"),
        (QWEN25_7B, 8, "", "qwen2's 28 attention heads"),
        (
            QWEN25_7B,
            8,
            "quantization: none\nruntime: pytorch",
            "qwen2's 28 attention heads",
        ),  # LLM-API route
    ],
)
def test_tensor_parallel_sizes_the_heads_do_not_divide_are_refused_at_plan(
    cli, llm_dir, config, tp, extra, heads
):
    _checkpoint_with(llm_dir, config)
    _with_tp(llm_dir, tp, extra)
    r = cli("plan", llm_dir / "llm.yaml")
    assert r.exit_code == 3, r.stderr
    assert (
        f"engine.tp_size: tensor parallel size {tp} does not divide" in r.stderr
        and heads in r.stderr
    )
    assert "llm.yaml:" in r.stderr and "Traceback" not in r.stderr
    assert (
        load("parallelism")["vllm"]["message"].format(heads=config["num_attention_heads"], tp=tp)
        in r.stderr
    )


def test_a_tensor_parallel_size_that_divides_the_heads_plans(cli, llm_dir):
    _checkpoint_with(llm_dir, QWEN25_7B)
    _with_tp(llm_dir, 4)  # 28 heads, 4 KV heads
    assert cli("plan", llm_dir / "llm.yaml").exit_code == 0


def test_vllm_tensor_parallel_size_the_heads_do_not_divide_is_refused_at_plan(cli, llm_dir):
    _checkpoint_with(llm_dir, LLAMA3_8B)
    text = (
        (ROOT / "recipes/gpu/tiny-llama-vllm.yaml")
        .read_text()
        .replace("../examples/tiny-llama", "tiny-llama")
    )
    (llm_dir / "v.yaml").write_text(text.replace("seed: 0", "seed: 0\n  tensor_parallel_size: 3"))
    r = cli("plan", llm_dir / "v.yaml")
    assert r.exit_code == 3 and "engine_args.tensor_parallel_size" in r.stderr
    # vLLM's own words (ModelConfig.verify_with_parallel_config, facts/parallelism.json)
    fact = load("parallelism")["vllm"]["message"].format(heads=32, tp=3)
    assert fact in r.stderr and "sizes that divide: 1, 2, 4, 8" in r.stderr
    (llm_dir / "v.yaml").write_text(text.replace("seed: 0", "seed: 0\n  tensor_parallel_size: 8"))
    assert cli("plan", llm_dir / "v.yaml").exit_code == 0


MIXTRAL_8X7B = {
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 32000,
    "max_position_embeddings": 32768,
}


def test_mixtral_int4_weight_only_plans_on_the_converter_path(cli, llm_dir):
    _checkpoint_with(llm_dir, MIXTRAL_8X7B)
    r = cli("plan", llm_dir / "llm.yaml", "--json")
    assert r.exit_code == 0, r.stderr
    (m,) = json.loads(r.stdout)["models"]
    engine = next(s for s in m["steps"] if s["kind"] == "trtllm.engine")
    assert engine["params"]["model_type"] == "mixtral"


def test_an_fp8_kv_cache_on_the_converter_path_is_refused_naming_quantize_py(cli, llm_dir):
    """llama's convert_checkpoint.py would mark the KV cache FP8 and leave its scales uncalibrated."""
    _edit(llm_dir / "llm.yaml", "tokens_per_block: 64", "tokens_per_block: 64\n  dtype: fp8")
    r = cli("plan", llm_dir / "llm.yaml")
    assert (
        r.exit_code == 3
        and "kv_cache.dtype" in r.stderr
        and "cannot calibrate a fp8 KV cache" in r.stderr
    )
    assert "quantize.py" in r.stderr


def test_dtype_auto_keeps_a_bfloat16_checkpoint_and_is_refused_where_the_gpu_lacks_bfloat16(
    cli, llm_dir
):
    config = json.loads((llm_dir / "tiny-llama" / "config.json").read_text())
    _checkpoint_with(llm_dir, {**config, "torch_dtype": "bfloat16"})
    text = (llm_dir / "llm.yaml").read_text().replace("dtype: float16\n", "")
    (llm_dir / "llm.yaml").write_text(text)
    r = cli("plan", llm_dir / "llm.yaml", "--json")
    assert r.exit_code == 0, r.stderr
    (m,) = json.loads(r.stdout)["models"]
    assert next(s for s in m["steps"] if s["kind"] == "trtllm.engine")["params"]["dtype"] == "auto"
    (llm_dir / "llm.yaml").write_text(text.replace("gpu: H200", "gpu: T4"))
    r = cli("plan", llm_dir / "llm.yaml")
    assert r.exit_code == 3 and "dtype: auto keeps the checkpoint's bfloat16" in r.stderr


def test_the_serving_entrypoint_launches_orchestrator_mode_as_upstreams_launcher(
    cli, llm_dir, tmp_path
):
    """Four instances of a one-GPU engine run in orchestrator mode: the entrypoint of the serving image reads the
    manifest and starts tritonserver the way tensorrtllm_backend's launch_triton_server.py --multi_model does."""
    import os
    import stat
    import subprocess

    _edit(
        llm_dir / "llm.yaml",
        "repository_mount: /models",
        "repository_mount: /models\n  gpu_device_ids: [0, 1, 2, 3]",
    )
    out = tmp_path / "OUT"
    assert (
        cli("build", llm_dir / "llm.yaml", "-o", out, "--engine", f"tiny-llama={ENGINE}").exit_code
        == 0
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in (
        "mpirun",
        "tritonserver",
    ):  # record argv and environment instead of starting anything
        (bin_dir / name).write_text(
            f'#!/bin/sh\necho "{name} $* TRTLLM_ORCHESTRATOR=$TRTLLM_ORCHESTRATOR '
            f'SPAWN=$TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES"\n'
        )
        (bin_dir / name).chmod(stat.S_IRWXU)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TRITONBUILD_MODELS": str(out)}
    got = subprocess.run(
        ["bash", str(ROOT / "ci/docker/entrypoint.sh")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    up = load("tensorrtllm_backend")["orchestrator_launch"]
    assert (
        got[: len(up["launcher"])] == up["launcher"] and got[len(up["launcher"])] == "tritonserver"
    )
    pools = [up["per_gpu_arg"].format(gpu=g) for g in range(4)]
    assert set(up["args"] + pools) <= set(got) and f"--model-repository={out}" in got
    assert f"TRTLLM_ORCHESTRATOR={up['env']['TRTLLM_ORCHESTRATOR']}" in got
    assert f"SPAWN={up['env']['TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES']}" in got
    # one GPU, one instance: a plain start
    single = tmp_path / "ONE"
    assert (
        cli(
            "build",
            ROOT / "recipes/examples/tiny-llama-int4.yaml",
            "-o",
            single,
            "--engine",
            f"tiny-llama={ENGINE}",
        ).exit_code
        == 0
    )
    env["TRITONBUILD_MODELS"] = str(single)
    plain = subprocess.run(
        ["bash", str(ROOT / "ci/docker/entrypoint.sh")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert plain[0] == "tritonserver" and not set(up["args"]) & set(plain)
    # the stock-image manifests start it the same way, and ask for the four GPUs its instance groups name
    assert (
        cli(
            "deploy-snippets", out, "-o", tmp_path / "deploy", "--target", "s3://bucket/models"
        ).exit_code
        == 0
    )
    docs = {
        d["kind"]: d
        for d in yaml.safe_load_all((tmp_path / "deploy" / "tritonserver.yaml").read_text())
    }
    (container,) = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["command"] == [*up["launcher"], "tritonserver"] and set(
        up["args"] + pools
    ) <= set(container["args"])
    assert {e["name"]: e["value"] for e in container["env"]} == up["env"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 4


def test_plan_says_which_route_and_why_and_an_unquantized_recipe_takes_the_llm_api_route(
    cli, llm_dir, tmp_path
):
    r = cli("plan", llm_dir / "llm.yaml")  # int4_weight_only (RTN): engine
    assert (
        r.exit_code == 0
        and "tiny-llama: TensorRT engine (runtime: engine) — INT4 weight-only RTN" in r.stdout
    )
    _edit(llm_dir / "llm.yaml", "quantization: int4_weight_only", "quantization: none", llmapi=True)
    r = cli("plan", llm_dir / "llm.yaml", "--json")
    (m,) = json.loads(r.stdout)["models"]
    assert m["extras"]["route"]["name"] == "LLM API (runtime: pytorch)"
    assert "TensorRT-LLM 1.1.0's default route" in m["extras"]["route"]["why"]
    assert [s["kind"] for s in m["steps"]] == ["trtllm.checkpoint"]  # no engine build on this route
    out = tmp_path / "OUT"
    assert cli("build", llm_dir / "llm.yaml", "-o", out).exit_code == 0
    assert (out / "tiny-llama" / "1" / "model.yaml").is_file() and not (
        out / "tiny-llama_tensorrt_llm"
    ).exists()


@pytest.mark.parametrize(
    "quantization_config, recipe, code, words",
    [
        (
            {"quant_method": "awq", "bits": 4, "group_size": 128},
            "int4_awq",
            3,
            "set runtime: engine",
        ),  # LLM API
        (
            {"quant_method": "awq", "bits": 4},
            "fp8",
            3,
            "already quantized (config.json quantization_config "
            "quant_method awq, 4 bits), the recipe says fp8",
        ),
        ({"quant_method": "gptq", "bits": 4}, "int4_awq", 3, "quant_method gptq, 4 bits"),
        ({"quant_method": "awq", "bits": 4}, "none", 3, "set quantization: int4_awq"),
    ],
)
def test_a_quantized_checkpoint_is_detected_on_the_llm_api_route(
    cli, llm_dir, quantization_config, recipe, code, words
):
    config = json.loads((llm_dir / "tiny-llama" / "config.json").read_text())
    _checkpoint_with(llm_dir, {**config, "quantization_config": quantization_config})
    _edit(
        llm_dir / "llm.yaml",
        "quantization: int4_weight_only",
        f"quantization: {recipe}\nruntime: pytorch",
    )
    r = cli("plan", llm_dir / "llm.yaml", *([] if code else ["--json"]))
    assert r.exit_code == code, r.stderr
    if code:
        assert words in r.stderr and "llm.yaml:" in r.stderr
    else:  # loaded as it is, no ModelOpt step
        (m,) = json.loads(r.stdout)["models"]
        assert [s["kind"] for s in m["steps"]] == ["trtllm.checkpoint"]


def test_a_checkpoint_modelopt_quantized_on_a_gpu_runner_is_assembled_with_engine(
    cli, llm_dir, tmp_path
):
    """The LLM-API route's quantize step is GPU-bound like an engine build: --matrix sends it to a GPU runner and
    --engine NAME=DIR hands its output (the quantized Hugging Face checkpoint) back."""
    _edit(
        llm_dir / "llm.yaml",
        "quantization: int4_weight_only",
        "quantization: int4_awq",
        llmapi=True,
    )
    (entry,) = json.loads(cli("plan", llm_dir / "llm.yaml", "--matrix").stdout)["include"]
    assert (entry["runner"], entry["steps"]) == ("gpu", ["trtllm.quantize"])
    quantized = tmp_path / "quantized"
    shutil.copytree(llm_dir / "tiny-llama", quantized)
    (quantized / "hf_quant_config.json").write_text('{"quantization": {"quant_algo": "W4A16_AWQ"}}')
    out = tmp_path / "OUT"
    r = cli("build", llm_dir / "llm.yaml", "-o", out, "--engine", f"tiny-llama={quantized}")
    assert r.exit_code == 0, r.stderr
    vdir = out / "tiny-llama" / "1"
    assert (vdir / "checkpoint" / "hf_quant_config.json").is_file() and (
        vdir / "model.yaml"
    ).is_file()
    assert (out / "tiny-llama_openai" / "config.pbtxt").is_file()


def _lora(
    llm_dir,
    name,
    files=("model.lora_weights.npy", "model.lora_config.npy"),
    content=b"w",
    engine=True,
):
    (llm_dir / name).mkdir(exist_ok=True)
    for f in files:
        (llm_dir / name / f).write_bytes(content)
    with (llm_dir / "llm.yaml").open(
        "a"
    ) as f:  # the engine route builds the LoRA plugin for target_modules
        f.write(
            f"lora:\n  adapters: {{fr: {name}}}\n"
            + ("  target_modules: [attn_q, attn_v]\n" if engine else "")
        )


def test_a_lora_adapter_without_its_weights_is_a_plan_error(cli, llm_dir, tmp_path):
    facts = load("clients")["openai_frontend"]["lora"]
    _lora(llm_dir, "fr-lora", files=facts["files"][1:])
    r = cli("build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT")
    assert (
        r.exit_code == 4
        and f"LoRA adapter 'fr' at {llm_dir / 'fr-lora'} lacks {facts['files'][0]}" in r.stderr
    )
    assert "llm.yaml:" in r.stderr and not (tmp_path / "OUT").exists()


def test_lora_adapters_are_keyed_by_content_not_path(cli, llm_dir, tmp_path):
    """Moving an adapter keeps its step's cache key; changing one byte of it changes the key."""
    _lora(llm_dir, "fr-lora")

    def key():
        r = cli("plan", llm_dir / "llm.yaml", "--json")
        assert r.exit_code == 0, r.stderr
        (m,) = json.loads(r.stdout)["models"]
        return [s["cache_key"] for s in m["steps"] if s["kind"] == "trtllm.lora"]

    first = key()
    shutil.move(llm_dir / "fr-lora", llm_dir / "moved")
    _edit(llm_dir / "llm.yaml", "fr: fr-lora", "fr: moved")
    assert len(first) == 1 and key() == first
    (llm_dir / "moved" / "model.lora_config.npy").write_bytes(b"x")
    assert key() != first


def test_changing_a_lora_adapter_changes_the_entry_points_identity(cli, llm_dir, tmp_path):
    """The adapters and multi_lora.json sit with the ensemble and the BLS: their model_identity follows them (a
    publish diff would otherwise call the changed repository unchanged); the engine's stays."""
    _lora(llm_dir, "fr-lora")

    def identities(out):
        r = cli("build", llm_dir / "llm.yaml", "-o", out, "--engine", f"tiny-llama={LORA_ENGINE}")
        assert r.exit_code == 0, r.stderr
        manifest = json.loads((out / "tritonbuild-manifest.json").read_text())
        return {m["name"]: m["model_identity"] for m in manifest["models"]}

    first = identities(tmp_path / "A")
    assert json.loads((tmp_path / "A" / "tiny-llama" / "1" / "multi_lora.json").read_text()) == {
        "fr": "tiny-llama/1/lora/fr"
    }
    (llm_dir / "fr-lora" / "model.lora_config.npy").write_bytes(b"changed")
    second = identities(tmp_path / "B")
    assert (
        first["tiny-llama"] != second["tiny-llama"]
        and first["tiny-llama_bls"] != second["tiny-llama_bls"]
    )
    assert first["tiny-llama_tensorrt_llm"] == second["tiny-llama_tensorrt_llm"]


def _peft(llm_dir, name, rank=8):
    """A Hugging Face PEFT adapter directory (what the LLM API loads with lora_ckpt_source hf)."""
    (llm_dir / name / "sub").mkdir(parents=True)
    (llm_dir / name / "adapter_config.json").write_text(
        json.dumps({"peft_type": "LORA", "r": rank, "target_modules": ["q_proj", "v_proj"]})
    )
    (llm_dir / name / "adapter_model.safetensors").write_bytes(
        b"\x02\x00\x00\x00\x00\x00\x00\x00{}"
    )
    (llm_dir / name / "sub" / "README.md").write_text(name)


def test_llmapi_route_packages_peft_adapters_for_the_llm_api_and_the_openai_frontend(
    cli, llm_dir, tmp_path
):
    """runtime: pytorch takes PEFT adapters: packaged in the LLM-API model's version directory (model.yaml's
    lora_config.lora_dir), multi_lora.json beside <name>_openai as the OpenAI frontend reads it."""
    facts = load("clients")["openai_frontend"]["lora"]
    _edit(
        llm_dir / "llm.yaml",
        "quantization: int4_weight_only",
        "quantization: none\nruntime: pytorch",
    )
    _peft(llm_dir, "fr-peft")
    _peft(llm_dir, "de-peft", rank=16)
    with (llm_dir / "llm.yaml").open("a") as f:
        f.write("lora:\n  adapters: {fr: fr-peft, de: de-peft}\n  max_lora_rank: 16\n")
    out = tmp_path / "OUT"
    r = cli("build", llm_dir / "llm.yaml", "-o", out)
    assert r.exit_code == 0, r.stderr
    import yaml

    vdir = out / "tiny-llama" / "1"
    spec = yaml.safe_load((vdir / "model.yaml").read_text())
    assert spec["lora_config"] == {"lora_dir": ["lora/de", "lora/fr"], "max_lora_rank": 16}
    assert all(
        (vdir / d / "adapter_config.json").is_file() for d in spec["lora_config"]["lora_dir"]
    )
    assert (vdir / "lora" / "fr" / "sub" / "README.md").read_text() == "fr-peft"
    table = json.loads((out / "tiny-llama_openai" / "1" / "multi_lora.json").read_text())
    assert table == {"de": "tiny-llama_openai/1/lora/de", "fr": "tiny-llama_openai/1/lora/fr"}
    assert all((out / rel / f).is_file() for rel in table.values() for f in facts["files"])
    mc = parse((out / "tiny-llama_openai" / "config.pbtxt").read_bytes())
    assert (
        mc.parameters["loras"].string_value == "1:de,2:fr"
    )  # the frontend's task ids, from 1 in file order
    assert mc.parameters["lora_dir"].string_value == "tiny-llama/1/lora"
    report = json.loads(cli("verify", out, "--json").stdout)
    assert all(c["ok"] for c in report["static"]), [c for c in report["static"] if not c["ok"]]


@pytest.mark.parametrize("case", ["npy adapter", "rank above the limit"])
def test_an_adapter_the_llm_api_cannot_load_is_a_plan_error(cli, llm_dir, tmp_path, case):
    _edit(
        llm_dir / "llm.yaml",
        "quantization: int4_weight_only",
        "quantization: none\nruntime: pytorch",
    )
    if case == "npy adapter":
        _lora(llm_dir, "fr-lora", engine=False)
        expected = "has no adapter_config.json: the LLM API loads Hugging Face PEFT adapters"
    else:
        _peft(llm_dir, "fr-peft", rank=128)  # LoraConfig.max_lora_rank defaults to 64
        with (llm_dir / "llm.yaml").open("a") as f:
            f.write("lora:\n  adapters: {fr: fr-peft}\n")
        expected = "has rank 128, above max_lora_rank 64"
    r = cli("build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT")
    assert r.exit_code == 4 and expected in r.stderr, r.stderr
    assert "llm.yaml:" in r.stderr and not (tmp_path / "OUT").exists()


def test_the_lora_plugins_settings_and_build_adapter_key_the_engine_step(cli, llm_dir, tmp_path):
    """The LoRA plugin is part of the engine: its settings are the trtllm.engine step's params and the PEFT adapter
    given for --lora_dir is one of its inputs by content (a changed byte rebuilds the engine; a moved one does not)."""
    _lora(llm_dir, "fr-lora")
    _peft(llm_dir, "fr-peft")
    _edit(
        llm_dir / "llm.yaml",
        "  target_modules: [attn_q, attn_v]\n",
        "  build_adapter: fr-peft\n  max_lora_rank: 8\n",
    )

    def engine_step():
        r = cli("plan", llm_dir / "llm.yaml", "--json")
        assert r.exit_code == 0, r.stderr
        (m,) = json.loads(r.stdout)["models"]
        return next(s for s in m["steps"] if s["kind"] == "trtllm.engine")

    first = engine_step()
    assert (
        first["params"]["lora"]["max_lora_rank"] == 8
        and "adapter_config.json" in first["params"]["lora"]["adapter"]
    )
    shutil.move(llm_dir / "fr-peft", llm_dir / "moved")
    _edit(llm_dir / "llm.yaml", "build_adapter: fr-peft", "build_adapter: moved")
    assert engine_step()["cache_key"] == first["cache_key"]
    (llm_dir / "moved" / "adapter_model.safetensors").write_bytes(b"changed")
    assert engine_step()["cache_key"] != first["cache_key"]
    (llm_dir / "moved" / "adapter_config.json").unlink()
    r = cli("plan", llm_dir / "llm.yaml")
    assert (
        r.exit_code == 4 and "lora.build_adapter" in r.stderr and "adapter_config.json" in r.stderr
    )


@pytest.mark.parametrize("rank", [8, 128])
def test_without_target_modules_the_plugin_is_built_for_what_the_adapters_adapt(cli, llm_dir, rank):
    """model.lora_config.npy rows are [module id, layer, adapter size] in LoraManager.LORA_MODULE_IDS numbering
    (trtllm_scripts.json trtllm-build.lora): the engine step's target modules are those ids' names; an adapter of
    a rank above max_lora_rank (trtllm-build's default 64) is a plan error."""
    import numpy as np

    ids = load("trtllm_scripts")["scripts"]["trtllm-build"]["lora"]["target_modules"]
    for name, modules in (("fr-lora", [1, 3]), ("de-lora", [1, 4])):
        (llm_dir / name).mkdir()
        np.save(llm_dir / name / "model.lora_weights.npy", np.zeros((1, 2, 16), np.float16))
        np.save(
            llm_dir / name / "model.lora_config.npy",
            np.array([[[m, layer, rank] for m in modules for layer in (0, 1)]], np.int32),
        )
    with (llm_dir / "llm.yaml").open("a") as f:
        f.write("lora:\n  adapters: {fr: fr-lora, de: de-lora}\n")
    if rank > 64:
        r = cli("plan", llm_dir / "llm.yaml")
        assert r.exit_code == 4 and "has rank 128, above max_lora_rank 64" in r.stderr, r.stderr
        return
    r = cli("plan", llm_dir / "llm.yaml", "--json")
    assert r.exit_code == 0, r.stderr
    (m,) = json.loads(r.stdout)["models"]
    lora = next(s for s in m["steps"] if s["kind"] == "trtllm.engine")["params"]["lora"]
    assert lora["target_modules"] == [ids[1], ids[3], ids[4]] == ["attn_q", "attn_v", "attn_dense"]


def test_an_llmapi_recipe_with_a_draft_model_packages_it_and_plans_its_memory(
    cli, llm_dir, tmp_path
):
    """speculative: the draft checkpoint is a content-keyed step packaged as <v>/draft/ (model.yaml's
    speculative_model_dir), and the memory plan counts its 16-bit weights and its KV for every token."""
    _edit(
        llm_dir / "llm.yaml",
        "quantization: int4_weight_only",
        "quantization: none\nruntime: pytorch",
    )
    plain = json.loads(cli("plan", llm_dir / "llm.yaml", "--json").stdout)["models"][0]["extras"][
        "memory_plan"
    ]
    shutil.copytree(llm_dir / "tiny-llama", llm_dir / "draft-llama")
    with (llm_dir / "llm.yaml").open("a") as f:
        f.write(
            "speculative: {mode: draft_target, max_draft_len: 4, draft_checkpoint: draft-llama}\n"
        )
    r = cli("plan", llm_dir / "llm.yaml", "--json")
    assert r.exit_code == 0, r.stderr
    (m,) = json.loads(r.stdout)["models"]
    mem = m["extras"]["memory_plan"]
    assert (
        mem["weight_bytes"] == 2 * plain["weight_bytes"]
    )  # the same checkpoint, 16-bit, as its own draft
    assert mem["kv_bytes_per_token"] == 2 * plain["kv_bytes_per_token"]
    assert mem["max_kv_tokens"] < plain["max_kv_tokens"]
    assert [s["kind"] for s in m["steps"]] == ["trtllm.checkpoint", "trtllm.draft"]
    out = tmp_path / "OUT"
    assert cli("build", llm_dir / "llm.yaml", "-o", out).exit_code == 0
    import yaml

    vdir = out / "tiny-llama" / "1"
    spec = yaml.safe_load((vdir / "model.yaml").read_text())
    assert (
        spec["speculative_config"]["speculative_model_dir"] == "draft"
        and (vdir / "draft" / "config.json").is_file()
    )
    (llm_dir / "draft-llama" / "config.json").unlink()
    r = cli("plan", llm_dir / "llm.yaml")
    assert (
        r.exit_code == 4
        and "speculative.draft_checkpoint" in r.stderr
        and "config.json" in r.stderr
    )


def test_speculative_decoding_on_the_engine_route_is_a_recipe_error_naming_the_llm_api_route(
    cli, llm_dir, tmp_path
):
    shutil.copytree(llm_dir / "tiny-llama", llm_dir / "draft-llama")
    with (llm_dir / "llm.yaml").open("a") as f:
        f.write("speculative: {mode: eagle, max_draft_len: 3, draft_checkpoint: draft-llama}\n")
    r = cli("build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT")
    assert (
        r.exit_code == 3
        and "speculative needs runtime: pytorch" in r.stderr
        and "llm.yaml:" in r.stderr
    )
    assert "Traceback" not in r.stderr and not (tmp_path / "OUT").exists()


def test_a_lora_recipe_around_an_engine_without_the_lora_plugin_is_refused(cli, llm_dir, tmp_path):
    """The C++ backend can serve no adapter on an engine built without the plugin: the engine check says so
    (build_config.plugin_config.lora_plugin, trtllm_scripts.json trtllm-build.lora.engine_config)."""
    _lora(llm_dir, "fr-lora")
    r = cli(
        "build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT", "--engine", f"tiny-llama={ENGINE}"
    )
    assert (
        r.exit_code != 0
        and "built without (build_config.plugin_config.lora_plugin unset)" in r.stderr
    ), r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "OUT").exists()
    ok = cli(
        "build",
        llm_dir / "llm.yaml",
        "-o",
        tmp_path / "OK",
        "--engine",
        f"tiny-llama={LORA_ENGINE}",
    )
    assert ok.exit_code == 0, ok.stderr


def test_a_lookahead_recipe_keys_the_engine_and_is_checked_against_the_built_engine(
    cli, llm_dir, tmp_path
):
    """speculative.mode lookahead: the engine step carries trtllm-build's mode and max_draft_len (a new cache key);
    an engine built without it is refused naming both sides; one whose config.json records it is assembled with
    decoding_mode lookahead (facts/trtllm_speculative.json engine_config)."""

    def engine_step():
        r = cli("plan", llm_dir / "llm.yaml", "--json")
        assert r.exit_code == 0, r.stderr
        return next(
            s for s in json.loads(r.stdout)["models"][0]["steps"] if s["kind"] == "trtllm.engine"
        )

    before = engine_step()
    with (llm_dir / "llm.yaml").open("a") as f:
        f.write(
            "speculative: {mode: lookahead, window_size: 4, ngram_size: 3, verification_set_size: 2}\n"
        )
    after = engine_step()
    facts = load("trtllm_speculative")
    draft_len = eval(
        facts["lookahead"]["max_draft_len"]["formula_python"], {}, {"w": 4, "n": 3, "g": 2}
    )
    assert after["params"]["speculative"] == {
        "mode": "lookahead_decoding",
        "max_draft_len": draft_len,
    }
    assert after["cache_key"] != before["cache_key"]
    r = cli(
        "build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT", "--engine", f"tiny-llama={ENGINE}"
    )
    assert (
        r.exit_code != 0
        and "speculative_decoding_mode none, the recipe asks for lookahead_decoding" in r.stderr
    )
    assert "Traceback" not in r.stderr and not (tmp_path / "OUT").exists()
    built = tmp_path / "lookahead-engine"
    shutil.copytree(ENGINE, built)
    cfg = json.loads((built / "config.json").read_text())
    modes = {v: int(k) for k, v in facts["engine_config"]["values"].items()}
    cfg["build_config"].update(
        speculative_decoding_mode=modes["lookahead_decoding"], max_draft_len=draft_len
    )
    (built / "config.json").write_text(json.dumps(cfg))
    ok = cli(
        "build", llm_dir / "llm.yaml", "-o", tmp_path / "OK", "--engine", f"tiny-llama={built}"
    )
    assert (
        ok.exit_code != 0 and "(which trtllm-build records as" in ok.stderr
    )  # upstream adds the draft length
    cfg["build_config"]["max_seq_len"] = eval(
        facts["draft_limits"]["max_seq_len"]["formula_python"],
        {},
        {"max_seq_len": cfg["build_config"]["max_seq_len"], "max_draft_len": draft_len},
    )
    (built / "config.json").write_text(json.dumps(cfg))
    ok = cli(
        "build", llm_dir / "llm.yaml", "-o", tmp_path / "OK", "--engine", f"tiny-llama={built}"
    )
    assert ok.exit_code == 0, ok.stderr
    mc = parse((tmp_path / "OK" / "tiny-llama_tensorrt_llm" / "config.pbtxt").read_bytes())
    backend = facts["backend"]  # what the tensorrtllm backend's model_instance_state.cc reads
    assert (
        mc.parameters["decoding_mode"].string_value == "lookahead"
        and "lookahead" in backend["decoding_mode_values"]
    )
    assert set(backend["lookahead_parameters"]) <= set(mc.parameters)
    assert mc.parameters["lookahead_window_size"].string_value == "4"


def _safetensors(path, names, fill=0):
    """A safetensors file (8-byte little-endian header length, JSON header, data) of one F16 value per name."""
    header = {
        n: {"dtype": "F16", "shape": [1], "data_offsets": [2 * i, 2 * i + 2]}
        for i, n in enumerate(names)
    }
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + bytes([fill]) * (2 * len(names)))
    return path.stat().st_size


def _head_names(heads=3, layers=1):
    """The tensors the Medusa converter's load_medusa_hf reads, named by the recorded patterns."""
    patterns = load("trtllm_speculative")["medusa"]["heads_dir"]["weights"]["tensors_python"]
    name = lambda p, h, layer: eval(p, {}, {"h": h, "l": layer, "num_medusa_layers": layers})  # noqa: E731
    names = [
        name(p, h, layer)
        for h in range(heads)
        for layer in range(layers)
        for p in patterns
        if "{l}" in p
    ]
    return names + [name(p, h, None) for h in range(heads) for p in patterns if "{l}" not in p]


def _heads(d, heads=3, layers=1, fill=0):
    return _safetensors(d / "medusa_lm_head.safetensors", _head_names(heads, layers), fill)


def _medusa(llm_dir, config='{"medusa_num_heads": 3, "medusa_num_layers": 1}'):
    d = llm_dir / "medusa-heads"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(config)
    _heads(d)
    _edit(
        llm_dir / "llm.yaml",
        "quantization: int4_weight_only",
        "quantization: int4_weight_only\ndtype: float16",
    )
    with (llm_dir / "llm.yaml").open("a") as f:
        f.write(
            "speculative: {mode: medusa, heads_checkpoint: medusa-heads, num_medusa_heads: 3, max_draft_len: 4,"
            " medusa_choices: [[0], [0, 0], [1]]}\n"
        )


def _plan(cli, llm_dir):
    r = cli("plan", llm_dir / "llm.yaml", "--json")
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)["models"][0]


def test_medusa_heads_key_the_engine_step_by_content_and_count_in_the_memory_plan(
    cli, llm_dir, tmp_path
):
    """speculative.mode medusa: the engine step carries trtllm-build's mode and max_draft_len, the converter's
    head settings and the heads' files by digest (a changed head is a new engine); the memory plan adds the heads'
    safetensors; the built engine is held to mode medusa (facts/trtllm_speculative.json engine_config)."""
    plain = _plan(cli, llm_dir)
    _medusa(llm_dir)
    first = _plan(cli, llm_dir)
    step = next(s for s in first["steps"] if s["kind"] == "trtllm.engine")
    assert {k: v for k, v in step["params"]["speculative"].items() if k != "heads"} == {
        "mode": "medusa",
        "max_draft_len": 4,
        "num_medusa_heads": 3,
        "num_medusa_layers": 1,
    }
    assert sorted(step["params"]["speculative"]["heads"]) == [
        "config.json",
        "medusa_lm_head.safetensors",
    ]
    size = (llm_dir / "medusa-heads" / "medusa_lm_head.safetensors").stat().st_size
    assert (
        first["extras"]["memory_plan"]["weight_bytes"]
        == plain["extras"]["memory_plan"]["weight_bytes"] + size
    )
    _heads(llm_dir / "medusa-heads", fill=1)
    again = next(s for s in _plan(cli, llm_dir)["steps"] if s["kind"] == "trtllm.engine")
    assert again["cache_key"] != step["cache_key"]
    r = cli(
        "build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT", "--engine", f"tiny-llama={ENGINE}"
    )
    assert (
        r.exit_code != 0
        and "speculative_decoding_mode none, the recipe asks for medusa" in r.stderr
    )
    assert "Traceback" not in r.stderr and not (tmp_path / "OUT").exists()


@pytest.mark.parametrize(
    "change, code, words",
    [
        (
            lambda d: (d / "config.json").unlink(),
            4,
            "has no config.json: examples/medusa/convert_checkpoint.py opens",
        ),
        (
            lambda d: (d / "medusa_lm_head.safetensors").unlink(),
            4,
            "has neither medusa_lm_head.pt nor medusa_lm_head.safetensors",
        ),
        (
            lambda d: (d / "medusa_lm_head.safetensors").write_bytes(b"\0" * 64),
            4,
            "has no safetensors header",
        ),
        (lambda d: _heads(d, heads=2), 3, "holds the tensors of 2 heads (no 2.0.linear.weight"),
        (lambda d: _heads(d, layers=2), 4, "lacks 0.1.weight"),
        (
            lambda d: (d / "config.json").write_text(
                '{"medusa_num_heads": 3, "medusa_num_layers": 2}'
            ),
            3,
            "speculative.num_medusa_layers 1, but",
        ),
        (
            lambda d: (d / "config.json").write_text(
                '{"medusa_num_heads": 2, "medusa_num_layers": 1}'
            ),
            3,
            "speculative.num_medusa_heads 3, but",
        ),
    ],
)
def test_a_medusa_heads_directory_the_converter_cannot_read_fails_the_plan_naming_the_key(
    cli, llm_dir, tmp_path, change, code, words
):
    """What examples/medusa/convert_checkpoint.py reads from --medusa_model_dir (facts/trtllm_speculative.json
    medusa.heads_dir): config.json, medusa_lm_head.pt or .safetensors holding each head's tensors; a heads
    directory that lacks them is a plan error, counts that contradict the recipe a recipe error, before any
    conversion or engine build."""
    _medusa(llm_dir)
    change(llm_dir / "medusa-heads")
    for args in (
        ("plan", llm_dir / "llm.yaml"),
        ("build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT"),
    ):
        r = cli(*args)
        assert r.exit_code == code and words in r.stderr and "llm.yaml:" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and not (tmp_path / "OUT").exists()


def test_medusa_heads_saved_as_a_pt_file_are_taken_as_the_converter_takes_them(
    cli, llm_dir, tmp_path
):
    """medusa_lm_head.pt first, the .safetensors only without it: a torch.save file's tensor names are read from its
    pickle without executing it (and the file is counted in the memory plan); a legacy-format .pt is taken as is."""
    torch = pytest.importorskip("torch")
    plain = _plan(cli, llm_dir)
    _medusa(llm_dir)
    d = llm_dir / "medusa-heads"
    names = _head_names()
    (d / "medusa_lm_head.safetensors").write_bytes(b"not read: the .pt comes first")
    torch.save({n: torch.zeros(2, dtype=torch.float16) for n in names}, d / "medusa_lm_head.pt")
    first = _plan(cli, llm_dir)
    assert (
        first["extras"]["memory_plan"]["weight_bytes"]
        == plain["extras"]["memory_plan"]["weight_bytes"] + (d / "medusa_lm_head.pt").stat().st_size
    )
    torch.save(
        {n: torch.zeros(2) for n in names if not n.startswith("2.")}, d / "medusa_lm_head.pt"
    )
    r = cli("build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT")
    assert r.exit_code == 3 and "holds the tensors of 2 heads (no 2.0.linear.weight" in r.stderr, (
        r.stderr
    )
    assert "Traceback" not in r.stderr and not (tmp_path / "OUT").exists()
    (d / "medusa_lm_head.pt").write_bytes(
        b"\x80\x02}q\x00."
    )  # a legacy (non-zip) pickle: names not listed
    assert (
        _plan(cli, llm_dir)["extras"]["memory_plan"]["weight_bytes"]
        == plain["extras"]["memory_plan"]["weight_bytes"] + 6
    )


def test_medusa_on_a_family_its_converter_does_not_take_is_a_recipe_error(cli, llm_dir, tmp_path):
    _medusa(llm_dir)
    cfg = json.loads((llm_dir / "tiny-llama" / "config.json").read_text())
    (llm_dir / "tiny-llama" / "config.json").write_text(json.dumps({**cfg, "model_type": "qwen2"}))
    r = cli("build", llm_dir / "llm.yaml", "-o", tmp_path / "OUT")
    assert r.exit_code == 3 and "speculative.mode" in r.stderr and "llama, mixtral" in r.stderr, (
        r.stderr
    )
    assert "Traceback" not in r.stderr and not (tmp_path / "OUT").exists()
