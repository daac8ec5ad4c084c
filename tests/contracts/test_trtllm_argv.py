"""Every command line tritonbuild would run is one TensorRT-LLM's own argparse accepts (facts/trtllm_scripts.json),
over the whole model-family × quantization × KV-dtype × parallelism matrix. A combination a script cannot
express must be a recipe error naming the key, the family and the alternative instead of a build that dies
inside the converter (argparse exits 2 on an unknown flag)."""

from __future__ import annotations

from itertools import product

import pytest

from tests.contracts.facts import load, script_for
from tritonbuild.backends.tensorrtllm import argv as cmd
from tritonbuild.backends.tensorrtllm.checks.recipe import check_recipe as check_llm_rules
from tritonbuild.backends.tensorrtllm.families import family_problems
from tritonbuild.backends.tensorrtllm.quant import NAMES as QUANTIZATIONS
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe

SCRIPTS = load("trtllm_scripts")["scripts"]
MODEL_TYPES = sorted({t for s in SCRIPTS.values() for t in s["model_types"]})
QUANTS = list(QUANTIZATIONS)
READS_QUANT_CONFIG = load("trtllm_quantization")["converters_read_quantization_config"][
    "model_types"
]
KV = ["auto", "int8", "fp8"]
PARALLEL = [(1, 1), (2, 1), (1, 2)]
RECIPE_KEYS = {
    ("quantization",),
    ("kv_cache", "dtype"),
    ("engine", "pp_size"),
    ("engine", "tp_size"),
    ("engine", "use_parallel_embedding"),
}


def _recipe(quantization: str, kv: str, tp: int, pp: int) -> LLMRecipe:
    return LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        runtime="engine",
        checkpoint={"path": "c"},
        quantization=quantization,
        kv_cache={"dtype": kv},
        engine={"tp_size": tp, "pp_size": pp},
        serving={"gpu_device_ids": list(range(tp * pp))},
        gpu="B200" if quantization == "nvfp4" else "H200",
    )


def _check_flags(argv: list[str], facts: dict, where: str) -> dict[str, str | None]:
    """Every option is in the script's flag set; every value of a flag with choices is one of them."""
    flags, choices = set(facts["flags"]), facts["choices"]
    seen: dict[str, str | None] = {}
    for i, tok in enumerate(argv):
        if not tok.startswith("-"):
            continue
        assert tok in flags, f"{where}: {tok} is not an argument of {facts['source']}"
        value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("-") else None
        if tok in choices:
            assert value in choices[tok], f"{where}: {tok} {value} not in {choices[tok]}"
        seen[tok] = value
    for flag in facts.get("required_flags", []):
        assert flag in seen, f"{where}: {facts['source']['path']} needs {flag}"
    return seen


def _upstream_rejects(facts: dict, quantization: str, kv: str, pp: int, model_type: str) -> bool:
    """What the recorded flag set says about one combination on the convert_checkpoint.py path."""
    if quantization in cmd.MODELOPT:
        return False  # ModelOpt quantize.py: every family, --kv_cache_dtype int8|fp8
    flags = set(facts["flags"])
    if quantization.startswith("int8_sq") and "--smoothquant" not in flags:
        return True
    if quantization == "int4_gptq" and model_type not in READS_QUANT_CONFIG:
        return True  # no update_quant_config_from_hf recorded: the GPTQ checkpoint is read as plain weights
    if kv != "auto" and (
        f"--{kv}_kv_cache" not in flags or kv in facts.get("kv_uncalibrated", {}).get("kv", [])
    ):
        return True  # no flag, or a flag that leaves the KV scales uncalibrated
    no_pp = "--pp_size" not in flags or any(
        "pp_size == 1" in a or "pipeline parallelism" in a.lower() for a in facts["asserts"]
    )
    return pp > 1 and no_pp


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_convert_argv_is_accepted_by_the_family_script(model_type, monkeypatch):
    monkeypatch.setenv("TRITONBUILD_TRTLLM_EXAMPLES", "/x/examples")
    name, facts = script_for(model_type)
    built = 0
    for quantization, kv, (tp, pp) in product(QUANTS, KV, PARALLEL):
        r = _recipe(quantization, kv, tp, pp)
        if check_llm_rules(r):
            continue  # refused for every family (e.g. fp8 weights + int8 KV)
        where = f"{model_type} {quantization} kv={kv} tp={tp} pp={pp}"
        problems = family_problems(r, model_type)
        assert bool(problems) == _upstream_rejects(facts, quantization, kv, pp, model_type), (
            where,
            problems,
        )
        for loc, message, hint in problems:
            assert tuple(loc) in RECIPE_KEYS and model_type in message and hint, (
                where,
                loc,
                message,
                hint,
            )
        if problems:
            continue
        pre = (
            {"source": "gptq", "group_size": 128, "zero_point": False}
            if quantization == "int4_gptq"
            else None
        )
        argv = cmd.convert_argv(r, model_type, "/ckpt", "/out", prequant=pre)
        script = "quantize" if quantization in cmd.MODELOPT else name
        path = SCRIPTS[script]["source"]["path"]
        assert argv[1] == "/x/" + path, where
        seen = _check_flags(argv[2:], SCRIPTS[script], where)
        if "--world-size" in SCRIPTS[script]["flags"]:
            assert seen.get("--world-size") == str(tp * pp), where
        elif "--tp_size" in seen:
            assert (seen["--tp_size"], seen.get("--pp_size", "1")) == (str(tp), str(pp)), where
        if kv != "auto":
            assert f"--{kv}_kv_cache" in seen or seen.get("--kv_cache_dtype") == kv, where
        built += 1
    assert built, f"no combination of {model_type} can be built"


def test_recipe_error_for_an_unsupported_combination_names_family_key_and_alternative(
    cli, tmp_path, in_root
):
    import shutil

    from tests.conftest import EXAMPLES

    shutil.copytree(EXAMPLES / "tiny-llama", tmp_path / "ck")
    cfg = (tmp_path / "ck" / "config.json").read_text().replace('"llama"', '"falcon"')
    (tmp_path / "ck" / "config.json").write_text(cfg)
    text = (
        (EXAMPLES / "tiny-llama-int4.yaml")
        .read_text()
        .replace("checkpoint: {path: tiny-llama}", f"checkpoint: {{path: {tmp_path / 'ck'}}}")
    )
    (tmp_path / "r.yaml").write_text(
        text.replace("  type: paged\n", "  type: paged\n  dtype: int8\n")
    )
    r = cli("plan", tmp_path / "r.yaml")
    assert r.exit_code == 3, r.stderr
    assert (
        "kv_cache.dtype" in r.stderr
        and "falcon" in r.stderr
        and "fix: use kv_cache.dtype: auto" in r.stderr
    )
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"kv_cache": {"tokens_per_block": 128}, "engine": {"logits_dtype": "float16"}},
        {"engine": {"use_paged_context_fmha": False, "tp_size": 2}},
    ],
)
def test_trtllm_build_argv_is_accepted_by_trtllm_build(kw):
    facts = SCRIPTS["trtllm-build"]
    r = LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        checkpoint={"path": "c"},
        serving={"gpu_device_ids": [0, 1]},
        **kw,
    )
    argv = cmd.build_argv(r, "/ck", "/eng", "/t.cache")
    assert argv[0] == "trtllm-build"
    seen = _check_flags(argv[1:], facts, str(kw))
    assert not set(seen) & set(facts["deprecated"])
    assert seen["--kv_cache_type"] == "paged" and seen["--tokens_per_block"] == str(
        r.kv_cache.tokens_per_block
    )


@pytest.mark.parametrize(
    "lora",
    [
        {"target_modules": ["attn_q", "attn_v"], "max_lora_rank": 8, "adapter": {}},
        {"target_modules": [], "max_lora_rank": 64, "adapter": {"adapter_config.json": "x"}},
    ],
)
def test_a_lora_engine_is_built_with_trtllm_builds_lora_plugin_arguments(lora):
    """The LoRA plugin, the rank its workspace is sized for, and what configures it: the target modules (each one of
    LoraManager.LORA_MODULE_IDS, build.py's choices) or a PEFT adapter for --lora_dir (source hf)."""
    from tritonbuild.backends.tensorrtllm.lora_build import lora_build_argv

    facts = SCRIPTS["trtllm-build"]
    r = LLMRecipe(name="m", version=1, backend="tensorrtllm", checkpoint={"path": "c"})
    adapter = "/peft" if lora["adapter"] else None
    argv = cmd.build_argv(r, "/ck", "/eng", "/t.cache") + lora_build_argv(lora, adapter)
    seen = _check_flags(argv[1:], facts, str(lora))
    assert {"--lora_plugin", "--max_lora_rank"} <= set(seen) and seen["--max_lora_rank"] == str(
        lora["max_lora_rank"]
    )
    if adapter:
        assert seen["--lora_dir"] == "/peft" and seen["--lora_ckpt_source"] == "hf"
    else:
        modules = argv[argv.index("--lora_target_modules") + 1 :]
        assert modules == lora["target_modules"] and set(modules) <= set(
            facts["lora"]["target_modules"]
        )
    assert lora_build_argv({}, None) == []


def test_the_recipes_lora_modules_are_trtllm_builds_choices():
    import typing

    from tritonbuild.backends.tensorrtllm.lora_build import MAX_LORA_RANK
    from tritonbuild.backends.tensorrtllm.recipe.lora import LoraModule

    assert list(typing.get_args(LoraModule)) == SCRIPTS["trtllm-build"]["lora"]["target_modules"]
    assert SCRIPTS["trtllm-build"]["lora"]["max_lora_rank_default"] == MAX_LORA_RANK
    with pytest.raises(ValueError, match=r"needs engine\.build_path: cli"):
        LLMRecipe(
            name="m",
            version=1,
            backend="tensorrtllm",
            checkpoint={"path": "c"},
            engine={"build_path": "llmapi"},
            lora={"adapters": {"a": "a"}, "target_modules": ["attn_q"]},
        )


@pytest.mark.parametrize("model_type", MODEL_TYPES)
@pytest.mark.parametrize(
    "quant, kv",
    [
        ("int4_awq", "auto"),
        ("fp8", "fp8"),
        ("int4_weight_only", "int8"),
        ("int8_sq_per_token", "auto"),
        ("w4a8_awq", "auto"),
        ("none", "int8"),
    ],
)
def test_a_local_calibration_dataset_reaches_every_calibrating_script(
    model_type, quant, kv, monkeypatch
):
    """Offline runners: every step that calibrates gets --calib_dataset DIR, and only scripts that have it."""
    monkeypatch.setenv("TRITONBUILD_TRTLLM_EXAMPLES", "/x/examples")
    r = _recipe(quant, kv, 1, 1)
    if check_llm_rules(r) or family_problems(r, model_type):
        return
    argv = cmd.convert_argv(
        r, model_type, "/ckpt", "/out", calib_dataset="/data/calib", calib_size=64
    )
    script = "quantize" if quant in cmd.MODELOPT else script_for(model_type)[0]
    seen = _check_flags(argv[2:], SCRIPTS[script], f"{model_type} {quant} {kv}")
    assert seen.get("--calib_dataset") == "/data/calib"
    if script == "quantize":
        assert seen["--calib_size"] == "64"


def test_calibration_dataset_is_part_of_the_engine_step(cli, tmp_path, in_root):
    import json
    import shutil

    from tests.conftest import EXAMPLES

    shutil.copytree(EXAMPLES / "tiny-llama", tmp_path / "tiny-llama")
    (tmp_path / "calib").mkdir()
    (tmp_path / "calib" / "train.jsonl").write_text('{"text": "Recipes become repositories."}\n')
    text = (EXAMPLES / "tiny-llama-int4.yaml").read_text()
    (tmp_path / "r.yaml").write_text(text + "calibration: {dataset: calib, size: 8}\n")
    plan = json.loads(cli("plan", tmp_path / "r.yaml", "--json").stdout)
    (step,) = [s for s in plan["models"][0]["steps"] if s["kind"] == "trtllm.engine"]
    assert (
        step["params"]["calibration"]["size"] == 8
        and "train.jsonl" in step["params"]["calibration"]["files"]
    )
    (tmp_path / "r.yaml").write_text(text + "calibration: {dataset: nowhere}\n")
    r = cli("plan", tmp_path / "r.yaml")
    assert r.exit_code == 4 and "not found" in r.stderr and "r.yaml" in r.stderr


@pytest.mark.parametrize("model_type", MODEL_TYPES)
@pytest.mark.parametrize("quant", ["int4_weight_only", "fp8"])
def test_parallel_embedding_reaches_only_scripts_that_take_it(model_type, quant, monkeypatch):
    monkeypatch.setenv("TRITONBUILD_TRTLLM_EXAMPLES", "/x/examples")
    r = LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        runtime="engine",
        checkpoint={"path": "c"},
        quantization=quant,
        engine={"tp_size": 2, "use_parallel_embedding": True},
        serving={"gpu_device_ids": [0, 1]},
    )
    script = "quantize" if quant == "fp8" else script_for(model_type)[0]
    takes = "--use_parallel_embedding" in SCRIPTS[script]["flags"]
    problems = family_problems(r, model_type)
    assert [tuple(p[0]) for p in problems] == (
        [] if takes else [("engine", "use_parallel_embedding")]
    )
    if takes:
        argv = cmd.convert_argv(r, model_type, "/ckpt", "/out")
        assert "--use_parallel_embedding" in _check_flags(argv[2:], SCRIPTS[script], model_type)


def test_dtype_defaults_to_upstreams_auto_on_every_route(monkeypatch):
    """Every converter, quantize.py and the LLM API default --dtype / dtype to auto (the checkpoint's own):
    a bfloat16 checkpoint stays bfloat16."""
    from tritonbuild.backends.tensorrtllm.llmapi.emit import model_yaml

    monkeypatch.setenv("TRITONBUILD_TRTLLM_EXAMPLES", "/x/examples")
    upstream = SCRIPTS["llama"]["defaults"]["--dtype"]
    r = LLMRecipe(name="m", version=1, backend="tensorrtllm", checkpoint={"path": "c"})
    assert r.dtype == upstream
    for quant in ("int4_weight_only", "int4_awq"):
        argv = cmd.convert_argv(
            r.model_copy(update={"quantization": quant}), "llama", "/ckpt", "/out"
        )
        assert argv[argv.index("--dtype") + 1] == upstream
    assert cmd.llmapi_spec(r, "/ckpt", "/engine")["dtype"] == upstream
    pt = LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        runtime="pytorch",
        quantization="none",
        checkpoint={"path": "c"},
    )
    assert model_yaml(pt)["dtype"] == upstream


def test_mixtral_converts_with_the_llama_converter_as_upstream_documents(monkeypatch):
    monkeypatch.setenv("TRITONBUILD_TRTLLM_EXAMPLES", "/x/examples")
    assert "mixtral" in SCRIPTS["llama"]["model_types_source"]
    r = _recipe("int4_weight_only", "auto", 2, 1)
    argv = cmd.convert_argv(r, "mixtral", "/ckpt", "/out")
    assert argv[1] == "/x/" + SCRIPTS["llama"]["source"]["path"]
    _check_flags(argv[2:], SCRIPTS["llama"], "mixtral")


@pytest.mark.parametrize(
    "quant, kv",
    [
        ("int4_awq", "auto"),
        ("int4_awq", "fp8"),
        ("fp8", "fp8"),
        ("fp8", "auto"),
        ("w4a8_awq", "auto"),
        ("nvfp4", "fp8"),
    ],
)
def test_the_llmapi_routes_modelopt_export_is_accepted_by_quantize_py(quant, kv, monkeypatch):
    monkeypatch.setenv("TRITONBUILD_TRTLLM_EXAMPLES", "/x/examples")
    params = {
        "quantization": quant,
        "dtype": "auto",
        "kv": {"dtype": kv},
        "calibration": {"size": 8},
    }
    argv = cmd.quantize_hf_argv(params, "/ckpt", "/out", "python3", "/data")
    assert argv[1] == "/x/" + SCRIPTS["quantize"]["source"]["path"]
    seen = _check_flags(argv[2:], SCRIPTS["quantize"], quant)
    assert (
        seen["--export_format"] == "hf"
        and seen["--qformat"] == quant
        and seen["--calib_dataset"] == "/data"
    )
    assert seen.get("--kv_cache_dtype") == (None if kv == "auto" else kv)


SPECULATIVE = load("trtllm_speculative")


@pytest.mark.parametrize("w, n, g", [(4, 3, 2), (7, 7, 7), (2, 2, 1), (1, 2, 0)])
def test_a_lookahead_engine_is_built_with_trtllm_builds_speculative_arguments(w, n, g):
    """--speculative_decoding_mode lookahead_decoding (one of build.py's choices) and --max_draft_len from (W, N, G)
    by TensorRT-LLM's own formula (calculateSpeculativeResourceTuple, facts/trtllm_speculative.json)."""
    from tritonbuild.backends.tensorrtllm import speculative as spec

    facts, formula = SCRIPTS["trtllm-build"], SPECULATIVE["lookahead"]["max_draft_len"]
    r = LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        checkpoint={"path": "c"},
        speculative={
            "mode": "lookahead",
            "window_size": w,
            "ngram_size": n,
            "verification_set_size": g,
        },
    )
    argv = cmd.build_argv(r, "/ck", "/eng", "/t.cache") + spec.build_argv(spec.engine_params_of(r))
    seen = _check_flags(argv[1:], facts, f"lookahead {w},{n},{g}")
    assert seen["--speculative_decoding_mode"] == "lookahead_decoding"
    assert seen["--max_draft_len"] == str(
        eval(formula["formula_python"], {}, {"w": w, "n": n, "g": g})
    )
    for case in formula["examples"]:  # README's engine for [7, 7, 7]: --max_draft_len=83
        if (case["w"], case["n"], case["g"]) == (w, n, g):
            assert seen["--max_draft_len"] == str(case["max_draft_len"])
    assert (
        spec.build_argv(None) == []
        and spec.engine_params_of(r.model_copy(update={"speculative": None})) is None
    )


@pytest.mark.parametrize(
    "quant, kv, tp",
    [("none", "auto", 1), ("int8_weight_only", "auto", 2), ("int4_weight_only", "int8", 1)],
)
def test_a_medusa_checkpoint_is_converted_by_the_medusa_converter_with_arguments_it_accepts(
    quant, kv, tp
):
    """examples/medusa/convert_checkpoint.py replaces the family's converter: every flag in its argparse
    (facts/trtllm_speculative.json medusa.converter), the heads directory and the recipe's head settings passed;
    trtllm-build then takes --speculative_decoding_mode medusa (one of build.py's choices)."""
    from tritonbuild.backends.tensorrtllm import speculative as spec

    facts = SPECULATIVE["medusa"]["converter"]
    r = LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        checkpoint={"path": "c"},
        dtype="bfloat16",
        quantization=quant,
        kv_cache={"dtype": kv},
        engine={"tp_size": tp},
        speculative={
            "mode": "medusa",
            "heads_checkpoint": "h",
            "num_medusa_heads": 3,
            "max_draft_len": 5,
            "medusa_choices": [[0], [0, 1], [1, 0, 2]],
        },
    )
    params = spec.engine_params_of(r)
    argv = cmd.convert_argv(
        r,
        "llama",
        "/ck",
        "/out",
        "python3",
        "/calib",
        32,
        None,
        spec.medusa_convert_flags(params, "/heads"),
    )
    assert argv[1].endswith("/" + facts["source"]["path"].removeprefix("examples/"))
    seen = _check_flags(argv[2:], facts, f"medusa {quant} {kv}")
    assert (
        seen["--medusa_model_dir"],
        seen["--num_medusa_heads"],
        seen["--max_medusa_token_len"],
    ) == ("/heads", "3", "5")
    assert seen["--tp_size"] == str(tp) and seen["--dtype"] == "bfloat16"
    if quant != "none":
        assert seen["--weight_only_precision"] == quant.split("_")[0]
    built = _check_flags(
        cmd.build_argv(r, "/ck", "/eng", "/t.cache")[1:] + spec.build_argv(params),
        SCRIPTS["trtllm-build"],
        "medusa build",
    )
    assert (built["--speculative_decoding_mode"], built["--max_draft_len"]) == ("medusa", "5")
    assert spec.medusa_convert_flags(
        None, None
    ) == [] and "--medusa_model_dir" not in cmd.convert_argv(
        r.model_copy(update={"speculative": None}), "llama", "/ck", "/out"
    )


@pytest.mark.parametrize(
    "batch, tokens, seq",
    [
        (1, 8192, 2048),
        (8, 64, 512),
        (64, 4096, 2048),
        (64, 8192, 2048),
        (256, 8192, 4096),
        (4, 40, 10),
        (2, 16, 8),
    ],
)
@pytest.mark.parametrize(
    "speculative",
    [
        {"mode": "lookahead", "window_size": 4, "ngram_size": 3, "verification_set_size": 2},
        {"mode": "lookahead", "window_size": 7, "ngram_size": 7, "verification_set_size": 7},
        {
            "mode": "medusa",
            "heads_checkpoint": "h",
            "max_draft_len": 63,
            "medusa_choices": [[0], [1]],
        },
    ],
)
def test_a_speculative_engine_recipe_passes_load_only_if_trtllm_build_keeps_its_limits(
    batch, tokens, seq, speculative
):
    """trtllm-build's flags as build_argv spells them run upstream's padding-removed, context-FMHA branch of
    check_max_num_tokens, then build()'s draft-token rules (facts/trtllm_speculative.json draft_limits): a recipe
    whose max_num_tokens those rules would change is a recipe error at load; one that loads is built as written
    (max_seq_len aside, which upstream increases by max_draft_len); no flag that build.py refuses with a draft
    length (gather_context_logits) is passed."""
    from tritonbuild.backends.tensorrtllm import speculative as spec

    facts = SPECULATIVE["draft_limits"]
    r = LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        checkpoint={"path": "c"},
        dtype="float16",
        quantization="none",
        speculative=speculative,
        engine={
            "max_batch_size": batch,
            "max_num_tokens": tokens,
            "max_seq_len": seq,
            "max_input_len": min(seq, 1024),
        },
    )
    params = spec.engine_params_of(r)
    seen = _check_flags(
        (cmd.build_argv(r, "/ck", "/eng", "/t.cache") + spec.build_argv(params))[1:],
        SCRIPTS["trtllm-build"],
        "speculative build",
    )
    assert seen["--remove_input_padding"] == seen["--context_fmha"] == "enable"
    assert not set(facts["gather_context_logits"]["flags"]) & set(seen)
    env = {
        "max_num_tokens": tokens,
        "max_seq_len": seq,
        "max_batch_size": batch,
        "min": min,
        "max": max,
        "tokens_per_block": int(seen["--tokens_per_block"]),
        "max_draft_len": int(seen["--max_draft_len"]),
    }
    for rule in facts["check_max_num_tokens"]["with_padding_removed_and_context_fmha"]:
        env["max_num_tokens"] = eval(rule["formula_python"], {}, env)
    env["max_seq_len"] = eval(facts["max_seq_len"]["formula_python"], {}, env)
    env["max_num_tokens"] = eval(facts["max_num_tokens"]["formula_python"], {}, env)
    refused = [loc for loc, *_ in check_llm_rules(r) if loc[0] == "engine"]
    assert bool(refused) == (env["max_num_tokens"] != tokens), (refused, env)
    assert spec.built_limits(r) == {
        "max_seq_len": env["max_seq_len"],
        "max_num_tokens": env["max_num_tokens"],
    }
