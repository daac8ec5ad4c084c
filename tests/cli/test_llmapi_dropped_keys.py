"""The recipe keys the LLM-API route (runtime: pytorch) used to drop without a word (issue 42, item 5): each is
honoured where TensorRT-LLM's LLM API reads it, or refused at plan (exit 3) naming the key, the upstream fact and
the fix.

- tokenizer: packaged into the version directory and named by model.yaml's `tokenizer` (BaseLlmArgs.tokenizer,
  facts/llm_args.json TorchLlmArgs; LLM() loads the tokenizer from `model` only when it is unset), so a checkpoint
  without tokenizer files still ships one.
- serving.add_special_tokens: the generated model's default for SamplingParams.add_special_tokens (facts/
  llm_args.json request.sampling_params: a SamplingParams field, default true), through model.yaml's triton_config.
- engine.use_parallel_embedding, engine.use_paged_context_fmha: no TorchLlmArgs field takes them (they are the
  converters' and trtllm-build's flags, facts/trtllm_scripts.json): a value other than the default is refused.
- calibration: only ModelOpt's quantize.py calibrates on this route; a recipe that plans no trtllm.quantize step
  (quantization: none, or a checkpoint already quantized) is refused."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from tests.cli.test_llmapi_keys import _recipe
from tests.contracts.facts import load
from tritonbuild.backends.llm.checkpoint import TOKENIZER_FILES

ARGS = load("llm_args")
SCRIPTS = load("trtllm_scripts")["scripts"]


def _without_tokenizer(tmp_path) -> None:
    """The recipe's checkpoint (tmp_path/tiny-llama) with its tokenizer files moved to tmp_path/tok."""
    (tmp_path / "tok").mkdir()
    for name in TOKENIZER_FILES:
        if (tmp_path / "tiny-llama" / name).is_file():
            shutil.move(tmp_path / "tiny-llama" / name, tmp_path / "tok" / name)


def test_the_tokenizer_key_is_packaged_and_named_in_model_yaml(cli, tmp_path):
    recipe = _recipe(tmp_path, "pytorch", {("tokenizer",): "tok"})
    _without_tokenizer(tmp_path)
    out = tmp_path / "OUT"
    r = cli("build", recipe, "-o", out)
    assert r.exit_code == 0, r.stderr
    vdir = out / "tiny-llama" / "1"
    spec = yaml.safe_load((vdir / "model.yaml").read_text())
    # LLM(tokenizer=...) is a BaseLlmArgs field in every recorded version
    assert "tokenizer" in ARGS["TorchLlmArgs"] and "tokenizer" in ARGS["at_main"]["TorchLlmArgs"]
    assert spec["tokenizer"] == "tokenizer"
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (vdir / "tokenizer" / name).read_bytes() == (tmp_path / "tok" / name).read_bytes()
    assert not (vdir / "checkpoint" / "tokenizer.json").exists()


def test_without_a_tokenizer_key_the_checkpoints_own_tokenizer_is_used(cli, tmp_path):
    out = tmp_path / "OUT"
    r = cli("build", _recipe(tmp_path, "pytorch", {}), "-o", out)
    assert r.exit_code == 0, r.stderr
    vdir = out / "tiny-llama" / "1"
    assert "tokenizer" not in yaml.safe_load((vdir / "model.yaml").read_text())
    assert (vdir / "checkpoint" / "tokenizer.json").is_file()
    assert not (vdir / "tokenizer").exists()


@pytest.mark.parametrize("value", [False, True])
def test_add_special_tokens_is_the_generated_models_sampling_default(cli, tmp_path, value):
    assert ARGS["request"]["sampling_params"]["add_special_tokens"] is True  # upstream's default
    assert "add_special_tokens" in ARGS["request"]["sampling_params"]["fields"]
    out = tmp_path / "OUT"
    r = cli(
        "build", _recipe(tmp_path, "pytorch", {("serving", "add_special_tokens"): value}), "-o", out
    )
    assert r.exit_code == 0, r.stderr
    spec = yaml.safe_load((out / "tiny-llama" / "1" / "model.yaml").read_text())
    assert spec["triton_config"]["add_special_tokens"] is value


# key → (the value that has no effect on the route, the upstream script flag that takes it)
ENGINE_ONLY = {
    ("engine", "use_parallel_embedding"): (True, "llama", "--use_parallel_embedding"),
    ("engine", "use_paged_context_fmha"): (False, "trtllm-build", "--use_paged_context_fmha"),
}


@pytest.mark.parametrize("key", sorted(ENGINE_ONLY), ids=".".join)
def test_an_engine_build_setting_is_refused_on_the_llm_api_route(cli, tmp_path, key):
    value, script, flag = ENGINE_ONLY[key]
    field = key[-1]
    # no LLM-API field takes it; the engine route's scripts do
    assert field not in ARGS["TorchLlmArgs"] and field not in ARGS["at_main"]["TorchLlmArgs"]
    assert flag in SCRIPTS[script]["flags"]
    keys = {key: value}
    if field == "use_paged_context_fmha":  # what needs it on the engine route is off
        keys[("kv_cache", "enable_block_reuse")] = False
    r = cli("plan", _recipe(tmp_path, "pytorch", keys))
    assert r.exit_code == 3, r.stderr
    assert (
        "llm.yaml:" in r.stderr
        and f"{'.'.join(key)}: {value!r} has no effect on runtime: pytorch" in r.stderr
        and "TorchLlmArgs has no" in r.stderr
        and "fix: " in r.stderr
        and "Traceback" not in r.stderr
    )
    assert cli("plan", _recipe(tmp_path / "engine", "engine", keys)).exit_code == 0


def _calibration(tmp_path) -> dict:
    (tmp_path / "calib.jsonl").write_text('{"text": "calibrate me"}\n')
    return {("calibration",): {"dataset": "calib.jsonl", "size": 4}}


def test_calibration_with_nothing_to_calibrate_is_refused(cli, tmp_path):
    r = cli("plan", _recipe(tmp_path, "pytorch", _calibration(tmp_path)))
    assert r.exit_code == 3, r.stderr
    assert (
        "llm.yaml:" in r.stderr
        and "calibration:" in r.stderr
        and "quantization: none" in r.stderr
        and "fix: " in r.stderr
        and "Traceback" not in r.stderr
    )


def test_calibration_with_a_checkpoint_already_quantized_is_refused(cli, tmp_path):
    """A checkpoint ModelOpt already quantized (hf_quant_config.json) is packaged as it is."""
    plain = _recipe(tmp_path, "pytorch", {("quantization",): "fp8"})
    (tmp_path / "tiny-llama" / "hf_quant_config.json").write_text(
        json.dumps({"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None}})
    )
    r = cli("plan", plain, "--json")
    assert r.exit_code == 0, r.stderr
    assert [s["kind"] for s in json.loads(r.stdout)["models"][0]["steps"]] == ["trtllm.checkpoint"]
    r = cli(
        "plan",
        _recipe(tmp_path, "pytorch", {**_calibration(tmp_path), **{("quantization",): "fp8"}}),
    )
    assert r.exit_code == 3, r.stderr
    assert "calibration:" in r.stderr and "already quantized" in r.stderr
    assert "fix: " in r.stderr and "Traceback" not in r.stderr


def test_calibration_reaches_modelopts_quantize_step(cli, tmp_path):
    keys = {**_calibration(tmp_path), ("quantization",): "fp8"}
    r = cli("plan", _recipe(tmp_path, "pytorch", keys), "--json")
    assert r.exit_code == 0, r.stderr
    (m,) = json.loads(r.stdout)["models"]
    (step,) = [s for s in m["steps"] if s["kind"] == "trtllm.quantize"]
    assert step["params"]["calibration"]["size"] == 4
    assert "--calib_dataset" in SCRIPTS["quantize"]["flags"]


def test_a_quantize_step_needs_the_tokenizer_in_the_checkpoint_it_quantizes(cli, tmp_path):
    """quantize.py calibrates with --model_dir's own tokenizer (facts/trtllm_llmapi.json tokenizer.quantize_reads):
    a served tokenizer elsewhere does not reach it."""
    reads = load("trtllm_llmapi")["tokenizer"]["quantize_reads"]
    assert reads["from"] == "model_dir"
    assert not [f for f in SCRIPTS["quantize"]["flags"] if "tokenizer_dir" in f]
    keys = {("tokenizer",): "tok", ("quantization",): "fp8"}
    recipe = _recipe(tmp_path, "pytorch", keys)
    shutil.copytree(
        tmp_path / "tiny-llama", tmp_path / "tok"
    )  # a tokenizer the checkpoint also has
    r = cli("plan", recipe, "--json")
    assert r.exit_code == 0, r.stderr
    kinds = [s["kind"] for s in json.loads(r.stdout)["models"][0]["steps"]]
    assert kinds[:2] == ["trtllm.quantize", "trtllm.tokenizer"]
    shutil.rmtree(tmp_path / "tok")
    _without_tokenizer(tmp_path)
    r = cli("plan", recipe)
    assert r.exit_code == 3, r.stderr
    assert "llm.yaml:" in r.stderr and "tokenizer: tok is served" in r.stderr
    assert "fix: copy the tokenizer files into the checkpoint" in r.stderr
