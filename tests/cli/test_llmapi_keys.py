"""No recipe key is dropped on the LLM-API route (runtime: pytorch): a key with an LLM-API equivalent lands in
model.yaml under the TorchLlmArgs name recorded in facts/llm_args.json route_keys (or in the generated model's
triton_config / instances), and one without is a recipe error (exit 3) at its file:line naming the route and the
fix, where the engine route takes the same value."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from tests.conftest import EXAMPLES, llmapi_recipe
from tests.contracts.facts import load
from tritonbuild.backends.tensorrtllm.llmapi.keys import LLM_API_FIELDS, REFUSED, SCHEDULER_POLICIES
from tritonbuild.triton.config import parse

ROUTE_KEYS = load("llm_args")["route_keys"]
# refused key → a value whose effect the LLM-API route cannot have
REFUSED_VALUES = {
    ("serving", "batching_strategy"): "inflight_batching",
    ("serving", "max_queue_delay_us"): 100,
    ("serving", "max_queue_size"): 8,
    ("serving", "bls"): True,
    ("serving", "instances", "preprocessing"): 3,
    ("serving", "instances", "postprocessing"): 3,
    ("serving", "instances", "bls"): 2,
    ("engine", "logits_dtype"): "float16",
    ("engine", "build_path"): "llmapi",
    ("engine", "use_parallel_embedding"): True,
    ("engine", "use_paged_context_fmha"): False,
}


def _recipe(tmp_path, runtime: str, keys: dict) -> object:
    """The example recipe on the given route (none quantized) with keys {path tuple: value} set."""
    shutil.copytree(EXAMPLES / "tiny-llama", tmp_path / "tiny-llama", dirs_exist_ok=True)
    spec = yaml.safe_load(llmapi_recipe((EXAMPLES / "tiny-llama-int4.yaml").read_text()))
    spec.update(quantization="none", runtime=runtime)
    for path, value in keys.items():
        owner = spec
        for part in path[:-1]:
            owner = owner.setdefault(part, {})
        owner[path[-1]] = value
    (tmp_path / "llm.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return tmp_path / "llm.yaml"


def test_every_refused_key_has_a_value_under_test():
    assert set(REFUSED_VALUES) == set(REFUSED)


@pytest.mark.parametrize("key", sorted(REFUSED), ids=".".join)
def test_a_key_the_llm_api_route_cannot_honour_is_a_recipe_error_naming_route_and_fix(
    cli, tmp_path, key
):
    r = cli("plan", _recipe(tmp_path, "pytorch", {key: REFUSED_VALUES[key]}))
    assert r.exit_code == 3, r.stderr
    assert (
        "llm.yaml:" in r.stderr
        and f"{'.'.join(key)}: {REFUSED_VALUES[key]!r} has no effect on runtime: pytorch"
        in r.stderr
        and "fix: " in r.stderr
        and "Traceback" not in r.stderr
    )


@pytest.mark.parametrize("key", sorted(k for k in REFUSED if k[0] == "serving"), ids=".".join)
def test_the_engine_route_takes_the_same_serving_value(cli, tmp_path, key):
    r = cli("plan", _recipe(tmp_path, "engine", {key: REFUSED_VALUES[key]}))
    assert r.exit_code == 0, r.stderr


def test_the_keys_with_an_llm_api_equivalent_land_in_model_yaml_and_the_model_config(cli, tmp_path):
    keys = {
        ("engine", "max_beam_width"): 2,
        ("engine", "max_input_len"): 512,
        ("serving", "enable_chunked_context"): True,
        ("serving", "scheduler_policy"): "max_utilization",
        ("serving", "exclude_input_in_output"): False,
        ("serving", "gpu_device_ids"): [2, 3],
    }
    out = tmp_path / "OUT"
    r = cli("build", _recipe(tmp_path, "pytorch", keys), "-o", out)
    assert r.exit_code == 0, r.stderr
    spec = yaml.safe_load((out / "tiny-llama" / "1" / "model.yaml").read_text())
    recorded = ROUTE_KEYS["recipe_to_llm_api"]
    for key, field in LLM_API_FIELDS.items():
        assert recorded[".".join(key)] == field and spec[field] == keys[key], field
    assert recorded["serving.scheduler_policy"] == "scheduler_config.capacity_scheduler_policy"
    assert spec["scheduler_config"] == {"capacity_scheduler_policy": "MAX_UTILIZATION"}
    assert set(SCHEDULER_POLICIES.values()) <= set(
        ROUTE_KEYS["SchedulerConfig"]["capacity_scheduler_policy"]
    )
    assert spec["triton_config"]["exclude_input_in_output"] is False
    mc = parse((out / "tiny-llama" / "config.pbtxt").read_bytes())
    assert [g.count for g in mc.instance_group] == [
        2
    ]  # one instance per GPU (tp_size 1), as upstream places them
    assert mc.parameters[ROUTE_KEYS["multi_instance"]["parameter"]].string_value == "2;3"


def test_no_batching_type_exists_on_the_pytorch_backend_of_any_recorded_version():
    args = load("llm_args")
    assert (
        "batching_type" not in args["TorchLlmArgs"]
        and "batching_type" not in args["at_main"]["TorchLlmArgs"]
    )
    for field in LLM_API_FIELDS.values():
        assert field in args["TorchLlmArgs"] and field in args["at_main"]["TorchLlmArgs"]


@pytest.mark.parametrize("multiple", [3, 2])
def test_an_eagle_head_must_be_the_eagle3_head_the_pytorch_backend_runs(cli, tmp_path, multiple):
    """Eagle3DraftModel's fc takes 3 captured layers of the target's hidden states (facts/llm_args.json
    speculative_config.eagle3_head): an EAGLE-1/2 head (fc over 2 × hidden) is a plan error; an EAGLE-3 head is
    planned with its own tensors' bytes, not a whole model's embedding and lm_head."""
    from tests.conftest import write_eagle_head

    head_bytes = write_eagle_head(tmp_path / "head", EXAMPLES / "tiny-llama", multiple)
    spec = {("speculative",): {"mode": "eagle", "max_draft_len": 3, "draft_checkpoint": "head"}}
    r = cli("plan", _recipe(tmp_path, "pytorch", spec), *(["--json"] if multiple == 3 else []))
    if multiple != 3:
        assert (
            r.exit_code == 4
            and "runs EAGLE-3 heads only" in r.stderr
            and "fc.weight [64, 128]" in r.stderr
        )
        assert "llm.yaml:" in r.stderr and "Traceback" not in r.stderr
        return
    assert r.exit_code == 0, r.stderr
    plain = cli("plan", _recipe(tmp_path / "plain", "pytorch", {}), "--json")
    weights = [
        json.loads(x.stdout)["models"][0]["extras"]["memory_plan"]["weight_bytes"]
        for x in (r, plain)
    ]
    assert weights[0] - weights[1] == head_bytes
