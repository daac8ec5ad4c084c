"""The generated TensorRT-LLM group against the tensorrtllm backend's recorded contract
(facts/tensorrtllm_backend.json, facts/clients.json): every parameter the C++ backend reads unguarded is
present and parseable; every declared tensor is upstream's (name, dtype, dims, optional, reshape); the
ensemble and the BLS accept what the OpenAI frontend and genai-perf send."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.contracts.facts import load, template
from tritonbuild.backends.tensorrtllm import configs as cfg
from tritonbuild.backends.tensorrtllm import parameters
from tritonbuild.backends.tensorrtllm import tensors as group_tensors
from tritonbuild.backends.tensorrtllm.orchestrator import needs_orchestrator
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
from tritonbuild.triton.config import model_config_pb2

ENGINE = json.loads((ROOT / "tests/fixtures/engines/tiny-llama-w4a16/config.json").read_text())
CPP = load("tensorrtllm_backend")["cpp_parameters"]
CLIENTS = load("clients")
NP_TO_TRITON = {
    "object": "TYPE_STRING",
    "bool": "TYPE_BOOL",
    "int32": "TYPE_INT32",
    "uint64": "TYPE_UINT64",
    "float32": "TYPE_FP32",
}
VARIANTS = [
    {},
    {"serving": {"streaming": True, "bls": True}},
    {
        "serving": {"batching_strategy": "V1", "scheduler_policy": "max_utilization"},
        "kv_cache": {"max_tokens": 4096, "enable_block_reuse": False},
    },
    {"serving": {"gpu_device_ids": [0, 1, 2, 3], "enable_chunked_context": True}},
]


def _recipe(**kw) -> LLMRecipe:
    return LLMRecipe(name="m", version=1, backend="tensorrtllm", checkpoint={"path": "c"}, **kw)


def _group(r: LLMRecipe) -> dict:
    names = cfg.Names.of(r.name)
    mbs = int(ENGINE["build_config"]["max_batch_size"])
    return {
        "tensorrt_llm": cfg.tensorrt_llm(r, names, ENGINE, "/models/m_tensorrt_llm/1/engine"),
        "ensemble": cfg.ensemble(r, names, mbs, cfg.logits_type(ENGINE)),
        "tensorrt_llm_bls": cfg.bls(r, names, mbs, cfg.logits_type(ENGINE)),
        "preprocessing": cfg.preprocessing(r, names, mbs, 2, 2),
        "postprocessing": cfg.postprocessing(r, names, mbs),
    }


def _spec(t) -> dict:
    pb2 = model_config_pb2()
    s = {"name": t.name, "data_type": pb2.DataType.Name(t.data_type), "dims": list(t.dims)}
    if "optional" in t.DESCRIPTOR.fields_by_name and t.optional:
        s["optional"] = True
    if "reshape" in t.DESCRIPTOR.fields_by_name and t.HasField("reshape"):
        s["reshape"] = list(t.reshape.shape)
    return s


def _upstream(model: str, kind: str) -> dict[str, dict]:
    logits = group_tensors.LOGITS_TYPE[ENGINE["pretrained_config"].get("logits_dtype", "float32")]
    out = {}
    for t in template(model)[kind]:
        t = {k: v for k, v in t.items() if k != "allow_ragged_batch"}
        if t["data_type"] == "${logits_datatype}":
            t["data_type"] = logits
        out[t["name"]] = t
    return out


@pytest.mark.parametrize("kw", VARIANTS)
def test_tensorrt_llm_carries_every_parameter_the_cpp_backend_reads_unguarded(kw):
    mc = _group(_recipe(**kw))["tensorrt_llm"]
    params = {k: v.string_value for k, v in mc.parameters.items()}
    missing = sorted(set(CPP["unguarded"]) - set(params))
    assert not missing, [CPP["missing_key_error"].format(key=k) for k in missing]
    unknown = sorted(set(params) - set(template("tensorrt_llm")["parameters"]))
    assert not unknown, f"parameters the backend never reads: {unknown}"
    assert params["gpt_model_type"] in CPP["gpt_model_type_values"]
    assert params["batch_scheduler_policy"] in CPP["batch_scheduler_policy_values"]
    for key in (
        "enable_kv_cache_reuse",
        "exclude_input_in_output",
        "enable_chunked_context",
        "normalize_log_probs",
    ):
        if key in params:
            assert params[key] in CPP["bool_values"], (key, params[key])
    for key in CPP["empty_allowed"]:
        assert params[key] == "" or not params[key].startswith("${"), key
    assert mc.model_transaction_policy.decoupled == bool(
        kw.get("serving", {}).get("streaming", False)
    )


@pytest.mark.parametrize("model", ["tensorrt_llm", "ensemble", "tensorrt_llm_bls"])
@pytest.mark.parametrize("kw", VARIANTS[:2])
def test_every_declared_tensor_is_upstreams(model, kw):
    mc = _group(_recipe(**kw))[model]
    sent = {
        n
        for client in CLIENTS.values()
        if isinstance(client, dict)
        for key, kind in client.items()
        if key != "source" and isinstance(kind, dict)
        for n in kind
    }
    for kind, tensors in (("inputs", mc.input), ("outputs", mc.output)):
        upstream = _upstream(model, kind)
        for t in tensors:
            if (
                kind == "inputs" and t.name in group_tensors.CLIENT_ALIASES
            ):  # a client's name for an upstream input
                assert t.name in sent and t.name not in upstream, t.name
                assert _spec(t) == {
                    **upstream[group_tensors.CLIENT_ALIASES[t.name]],
                    "name": t.name,
                }, t.name
                continue
            assert t.name in upstream, (
                f"{model} {kind[:-1]} {t.name} is not in upstream's {model} template"
            )
            assert _spec(t) == upstream[t.name], (model, t.name)
    upstream_required = {n for n, t in _upstream(model, "inputs").items() if not t.get("optional")}
    assert {t.name for t in mc.input if not t.optional} == upstream_required


@pytest.mark.parametrize(
    "client, inputs",
    [
        ("openai_frontend", CLIENTS["openai_frontend"]["always"]),
        (
            "openai_frontend+options",
            {
                **CLIENTS["openai_frontend"]["always"],
                **{
                    k: v
                    for k, v in CLIENTS["openai_frontend"]["optional"].items()
                    if not k.startswith(("lora_", "guided_"))
                },
            },
        ),
        ("genai-perf", CLIENTS["genai_perf"]["default"]),
        ("genai-perf --streaming", CLIENTS["genai_perf"]["streaming"]),
        ("genai-perf --output-tokens-mean-deterministic", CLIENTS["genai_perf"]["deterministic"]),
    ],
)
@pytest.mark.parametrize("model", ["ensemble", "tensorrt_llm_bls"])
def test_client_input_sets_are_declared(model, client, inputs):
    mc = _group(_recipe(serving={"streaming": True, "bls": True}))[model]
    declared = {t.name: _spec(t) for t in mc.input}
    for name, (dtype, shape) in inputs.items():
        assert name in declared, f"{client} sends {name}; {model} rejects it (HTTP 400)"
        assert declared[name]["data_type"] == NP_TO_TRITON[dtype], (name, declared[name])
        assert len(declared[name]["dims"]) + 1 == len(shape), (name, declared[name], shape)
    for name in CLIENTS["openai_frontend"]["reads_outputs"]:
        assert name in {t.name for t in mc.output}, f"{model} does not return {name}"
    np.testing.assert_equal(
        sorted(t.name for t in mc.input if not t.optional), ["max_tokens", "text_input"]
    )


def test_ensemble_routes_stream_and_sampling_to_upstream_names():
    mc = _group(_recipe(serving={"streaming": True}))["ensemble"]
    steps = {s.model_name: s for s in mc.ensemble_scheduling.step}
    llm = steps["m_tensorrt_llm"]
    assert llm.input_map["streaming"] == "stream"
    for upstream_name, ensemble_name in {
        "runtime_top_k": "top_k",
        "runtime_top_p": "top_p",
        "len_penalty": "length_penalty",
        "seed": "seed",
        "exclude_input_in_output": "exclude_input_in_output",
        "return_num_output_tokens": "return_num_output_tokens",
    }.items():
        assert llm.input_map[upstream_name] == ensemble_name
    ensemble_inputs = {t.name for t in mc.input}
    for step in steps.values():
        for source in step.input_map.values():
            assert source in ensemble_inputs or source.startswith("_"), (step.model_name, source)


@pytest.mark.parametrize(
    "kw, groups, orchestrator",
    [
        ({}, 1, False),
        ({"serving": {"gpu_device_ids": [0, 1, 2, 3]}}, 4, True),
        ({"engine": {"tp_size": 2}, "serving": {"gpu_device_ids": [0, 1, 2, 3]}}, 2, True),
        ({"engine": {"tp_size": 2}, "serving": {"gpu_device_ids": [0, 1]}}, 1, True),
    ],
)
def test_one_instance_per_device_group_and_orchestrator_mode_for_multi_gpu(
    kw, groups, orchestrator
):
    """The backend gives instance i the device group i % len(groups): as many instances as groups, or GPUs sit
    idle. Several ranks or instances in one server need orchestrator mode (executor_worker_path +
    TRTLLM_ORCHESTRATOR=1), since the serving entrypoint starts one tritonserver, not one per MPI rank."""
    r = _recipe(**kw)
    mc = _group(r)["tensorrt_llm"]
    params = {k: v.string_value for k, v in mc.parameters.items()}
    assert (
        sum(g.count for g in mc.instance_group)
        == groups
        == len(params["gpu_device_ids"].split(";"))
    )
    assert ("executor_worker_path" in params) == orchestrator == needs_orchestrator(r)
    assert "executor_worker_path" in CPP["guarded"]


def test_the_backends_unguarded_list_is_the_recorded_one():
    assert set(parameters.UNGUARDED) == set(CPP["unguarded"])
    assert set(parameters.UNGUARDED_VALUES["gpt_model_type"]) == set(CPP["gpt_model_type_values"])


def test_verify_flags_a_repository_that_lacks_an_unguarded_parameter(cli, tmp_path, in_root):
    """A repository built before #9 (or hand-edited) fails `tritonbuild verify` offline, naming the key, instead
    of failing to load on the GPU server."""
    from tritonbuild.triton.config import parse, render

    out = tmp_path / "OUT"
    r = cli(
        "build",
        "recipes/examples/tiny-llama-int4.yaml",
        "-o",
        out,
        "--engine",
        f"tiny-llama={ROOT / 'tests/fixtures/engines/tiny-llama-w4a16'}",
    )
    assert r.exit_code == 0, r.stderr
    cfg_path = out / "tiny-llama_tensorrt_llm" / "config.pbtxt"
    mc = parse(cfg_path.read_bytes())
    del mc.parameters["xgrammar_tokenizer_info_path"]
    cfg_path.write_bytes(render(mc))
    report = json.loads(cli("verify", out, "--json").stdout)
    bad = {c["check"]: c["detail"] for c in report["static"] if not c["ok"]}
    assert set(bad) == {
        "tensorrtllm.parameters",
        "manifest",
    }  # the manifest notices the hand edit too
    assert (
        "Cannot find parameter with name: xgrammar_tokenizer_info_path"
        in bad["tensorrtllm.parameters"]
    )


PERF = load("tensorrtllm_backend")["perf_metrics"]
GUIDED = load("tensorrtllm_backend")["guided_decoding"]


@pytest.mark.parametrize("model", ["tensorrt_llm", "ensemble", "tensorrt_llm_bls"])
def test_perf_metrics_input_and_outputs_are_upstreams(model):
    """return_perf_metrics and every output the C++ backend adds for it (utils.h), declared as the templates do."""
    mc = _group(_recipe(serving={"bls": True}))[model]
    inputs, outputs = {t.name: _spec(t) for t in mc.input}, {t.name: _spec(t) for t in mc.output}
    assert inputs[PERF["input"]] == _upstream(model, "inputs")[PERF["input"]]
    for name, dtype in PERF["outputs"].items():
        assert name in outputs, f"{model} does not return {name}"
        assert (
            outputs[name] == _upstream(model, "outputs")[name]
            and outputs[name]["data_type"] == dtype
        )
    if model == "ensemble":
        llm = next(s for s in mc.ensemble_scheduling.step if s.model_name == "m_tensorrt_llm")
        assert llm.input_map[PERF["input"]] == PERF["input"]
        assert {llm.output_map[n] for n in PERF["outputs"]} == set(PERF["outputs"])


def test_guided_decoding_turns_on_upstreams_config_and_takes_the_tool_choice_inputs():
    plain = _group(_recipe(serving={"bls": True}))
    off = {k: v.string_value for k, v in plain["tensorrt_llm"].parameters.items()}
    assert not (
        off["guided_decoding_backend"] and off["xgrammar_tokenizer_info_path"]
    )  # line 424: off
    tool = CLIENTS["openai_frontend"]["tool_choice_guide"]
    for model in (
        "ensemble",
        "tensorrt_llm_bls",
        "tensorrt_llm",
    ):  # off: a guided request is a 400 at the door
        assert not {t.name for t in plain[model].input} & set(tool), model
    assert (
        "guided_decoding_guide"
        not in plain["tensorrt_llm_bls"].parameters["request_inputs"].string_value
    )
    r = _recipe(
        serving={"guided_decoding": {"backend": "xgrammar"}, "repository_mount": "/srv/models"}
    )
    group = _group(r)
    params = {k: v.string_value for k, v in group["tensorrt_llm"].parameters.items()}
    assert params["guided_decoding_backend"] in GUIDED["backends"]
    assert params["xgrammar_tokenizer_info_path"].startswith("/srv/models/m_tensorrt_llm/1/")
    for model in ("ensemble", "tensorrt_llm_bls", "tensorrt_llm"):
        declared = {t.name: t for t in group[model].input}
        for name in ("guided_decoding_guide_type", "guided_decoding_guide"):
            assert name in tool and _spec(declared[name]) == _upstream(model, "inputs")[name], (
                model,
                name,
            )
    assert tool["guided_decoding_guide_type"] in GUIDED["guide_types"]


def test_a_guided_decoding_backend_neither_route_has_is_a_recipe_error():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="xgrammar"):
        _recipe(serving={"guided_decoding": {"backend": "outlines"}})


def test_xgrammar_tokenizer_info_holds_what_the_cpp_backend_parses(tmp_path):
    from tritonbuild.backends.tensorrtllm.group import xgrammar_info

    tok = {
        "model": {"type": "BPE", "vocab": {"<s>": 0, "</s>": 1, "a": 2, "Ġb": 3}},
        "added_tokens": [{"id": 4, "content": "<pad>"}],
    }
    (tmp_path / "tokenizer.json").write_text(json.dumps(tok))
    info = xgrammar_info(tmp_path, 1)
    assert set(info) == set(GUIDED["tokenizer_info_keys"])
    vocab = {
        **tok["model"]["vocab"],
        **{t["content"]: t["id"] for t in tok.get("added_tokens", [])},
    }
    assert len(info["encoded_vocab"]) == max(vocab.values()) + 1
    assert all(info["encoded_vocab"][i] == t for t, i in vocab.items())
    assert info["tokenizer_str"] == (tmp_path / "tokenizer.json").read_text() and info[
        "stop_token_ids"
    ] == [1]


LORA = load("tensorrtllm_backend")["lora"]


@pytest.mark.parametrize("model", ["tensorrt_llm", "ensemble", "tensorrt_llm_bls"])
def test_lora_inputs_are_upstreams_where_the_recipe_has_adapters(model):
    plain = {t.name for t in _group(_recipe(serving={"bls": True}))[model].input}
    assert not plain & set(LORA["inputs"])  # no adapters: a LoRA request is refused at the door
    r = _recipe(
        serving={"bls": True},
        lora={
            "adapters": {"fr": "a"},
            "cache_gpu_memory_fraction": 0.1,
            "target_modules": ["attn_qkv"],
        },
    )
    mc = _group(r)[model]
    declared = {t.name: _spec(t) for t in mc.input}
    for name in LORA["inputs"]:
        assert declared[name] == _upstream(model, "inputs")[name], (model, name)
        assert name in CLIENTS["openai_frontend"]["optional"]
    if model == "tensorrt_llm":
        params = {k: v.string_value for k, v in mc.parameters.items()}
        assert params["lora_cache_gpu_memory_fraction"] == "0.1"
        assert {k for k in params if k.startswith("lora_")} <= set(LORA["cache_parameters"])
    if model == "ensemble":
        llm = next(s for s in mc.ensemble_scheduling.step if s.model_name == "m_tensorrt_llm")
        assert all(llm.input_map[n] == n for n in LORA["inputs"])


RUNTIME = load("tensorrtllm_backend")["runtime_defaults"]


def test_runtime_knobs_are_written_with_the_cpp_backends_own_defaults():
    """Every knob the recipe leaves alone is written with the value the backend would use without it."""
    params = {k: v.string_value for k, v in _group(_recipe())["tensorrt_llm"].parameters.items()}
    for key, fact in RUNTIME["values"].items():
        assert key in template("tensorrt_llm")["parameters"] and key in CPP["guarded"], key
        value = params[key]
        if isinstance(fact["default"], bool):
            assert (
                value in CPP["bool_values"] and (value.lower() in ("true", "1")) == fact["default"]
            ), key
        else:
            assert float(value) == fact["default"], (key, value)
    changed = _recipe(
        executor={"gpu_weights_percent": 0.5, "cuda_graph_mode": True},
        kv_cache={"host_memory_bytes": 1 << 30, "onboard_blocks": False},
    )
    params = {k: v.string_value for k, v in _group(changed)["tensorrt_llm"].parameters.items()}
    assert (params["gpu_weights_percent"], params["cuda_graph_mode"]) == ("0.5", "true")
    assert (params["kv_cache_host_memory_bytes"], params["kv_cache_onboard_blocks"]) == (
        str(1 << 30),
        "false",
    )


def test_runtime_knobs_off_the_engine_route_are_a_recipe_error():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"executor\.cuda_graph_mode .*needs runtime: engine"):
        _recipe(runtime="pytorch", quantization="none", executor={"cuda_graph_mode": True})
    with pytest.raises(ValidationError, match=r"kv_cache\.host_memory_bytes"):
        _recipe(runtime="pytorch", quantization="none", kv_cache={"host_memory_bytes": 1})


def test_attention_window_and_sink_tokens_are_written_only_when_set():
    """Upstream's default for both is the parameter missing (read in a try block with no value of its own); set,
    they are the template's keys in the form the backend parses."""
    optional = RUNTIME["optional"]["values"]
    plain = _group(_recipe())["tensorrt_llm"].parameters
    assert not set(optional) & set(plain)
    r = _recipe(kv_cache={"max_attention_window_size": [1024, 4096], "sink_token_length": 4})
    params = {k: v.string_value for k, v in _group(r)["tensorrt_llm"].parameters.items()}
    for key in optional:
        assert key in template("tensorrt_llm")["parameters"] and key in CPP["guarded"], key
    assert params["max_attention_window_size"] == "1024,4096" and params["sink_token_length"] == "4"
    stats = _recipe(executor={"iter_stats_max_iterations": 50, "request_stats_max_iterations": 10})
    params = {k: v.string_value for k, v in _group(stats)["tensorrt_llm"].parameters.items()}
    assert (params["iter_stats_max_iterations"], params["request_stats_max_iterations"]) == (
        "50",
        "10",
    )


def test_the_per_release_unguarded_table_is_the_recorded_one():
    """checks/load.py UNGUARDED_BY_RELEASE against what each release's C++ sources read outside a try block
    (facts/tensorrtllm_releases.json, with file:line); main (c2e65b8) reads what r25.04 reads."""
    from tritonbuild.backends.tensorrtllm.checks.load import GUIDED_DECODING, UNGUARDED_BY_RELEASE

    releases = load("tensorrtllm_releases")["releases"]
    assert {tag: set(keys) for tag, keys in UNGUARDED_BY_RELEASE.items()} == {
        tag: set(r["unguarded"]) for tag, r in releases.items()
    }
    assert set(UNGUARDED_BY_RELEASE["r25.04"]) == set(CPP["unguarded"]) == set(parameters.UNGUARDED)
    assert set(GUIDED_DECODING) == set(UNGUARDED_BY_RELEASE["r25.04"]) - set(
        UNGUARDED_BY_RELEASE["r24.10"]
    )


def test_lookahead_sets_the_cpp_backends_decoding_mode_and_its_three_parameters():
    """decoding_mode lookahead (one of the values model_instance_state.cc parses) and the (W, N, G) it reads only in
    lookahead mode (a missing one fails the load); every key a template parameter the backend reads guarded."""
    facts = load("trtllm_speculative")["backend"]
    plain = {k: v.string_value for k, v in _group(_recipe())["tensorrt_llm"].parameters.items()}
    assert "decoding_mode" not in plain and not {k for k in plain if k.startswith("lookahead_")}
    r = _recipe(
        speculative={
            "mode": "lookahead",
            "window_size": 4,
            "ngram_size": 3,
            "verification_set_size": 2,
        }
    )
    params = {k: v.string_value for k, v in _group(r)["tensorrt_llm"].parameters.items()}
    assert (
        params["decoding_mode"] in facts["decoding_mode_values"]
        and params["decoding_mode"] == "lookahead"
    )
    assert [params[k] for k in facts["lookahead_parameters"]] == ["4", "3", "2"]
    for key in ("decoding_mode", *facts["lookahead_parameters"]):
        assert key in template("tensorrt_llm")["parameters"] and key in CPP["guarded"], key


def _csv_str_to_vec_vec_int(text: str) -> list[list[int]]:
    """The backend's csvStrToVecVecInt as facts/trtllm_speculative.json medusa.choices_format records it: read up to
    each '}', drop a leading '{', the rest comma-separated ints; skip the separator and whitespace."""
    assert text, "TLLM_CHECK: Cannot convert empty string to vector of vector of ints"
    out, rest = [], text
    while "}" in rest:
        group, rest = rest.split("}", 1)
        if not group:
            break
        group = group[1:] if group.startswith("{") else group
        out.append([int(x) for x in group.split(",")])
        rest = rest.lstrip().removeprefix(",").lstrip()
    return out


def test_medusa_sets_decoding_mode_medusa_and_the_choices_in_the_backends_format():
    facts = load("trtllm_speculative")
    choices = [[0], [0, 0], [1], [0, 1, 2]]
    r = _recipe(
        dtype="float16",
        speculative={
            "mode": "medusa",
            "heads_checkpoint": "h",
            "max_draft_len": 4,
            "medusa_choices": choices,
        },
    )
    params = {k: v.string_value for k, v in _group(r)["tensorrt_llm"].parameters.items()}
    assert (
        params["decoding_mode"] == "medusa" and "medusa" in facts["backend"]["decoding_mode_values"]
    )
    fmt = facts["medusa"]["choices_format"]
    assert "no outer braces" in fmt["grammar"]
    assert _csv_str_to_vec_vec_int(params[fmt["parameter"]]) == choices
    assert not {k for k in params if k.startswith("lookahead_")}
    for key in ("decoding_mode", fmt["parameter"]):
        assert key in template("tensorrt_llm")["parameters"], key
