"""engine_args.extra: any other AsyncEngineArgs field of the image's vLLM, written into model.json (vllm_backend
passes it to AsyncEngineArgs(**...)); checked against the fields recorded for that vLLM
(builder/facts/vllm_engine_args.json), never a typed field twice, never a field tritonbuild writes."""

from __future__ import annotations

import json
import re

import pytest

from tests.contracts.facts import engine_args_of_image, vllm_versions


def _recipe(tmp_path, extra: str, tag: str | None = None, more: str = ""):
    from tests.conftest import EXAMPLES, ROOT

    text = (ROOT / "recipes" / "gpu" / "tiny-llama-vllm.yaml").read_text()
    text = text.replace("../examples/tiny-llama", str(EXAMPLES / "tiny-llama"))
    text = text.replace("  seed: 0\n", f"  seed: 0\n  extra: {extra}\n")
    image = (
        f"image: {{triton_image: 'nvcr.io/nvidia/tritonserver:{tag}-vllm-python-py3'}}\n"
        if tag
        else ""
    )
    text = text.replace(
        "serving: {repository_mount: /models}", f"serving: {{repository_mount: {tmp_path / 'OUT'}}}"
    )
    (tmp_path / "v.yaml").write_text(text + image + more)
    return tmp_path / "v.yaml"


EXTRA = {
    "kv_cache_dtype": "fp8",
    "max_num_batched_tokens": 1024,
    "enable_chunked_prefill": True,
    "served_model_name": ["tiny"],
}


def test_extra_engine_args_are_written_into_model_json(cli, tmp_path):
    path = _recipe(tmp_path, json.dumps(EXTRA))
    (tmp_path / "plain").mkdir()
    plain = _recipe(tmp_path / "plain", "{}")
    r = cli("build", path, "-o", tmp_path / "OUT")
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "OUT" / "tiny-llama-vllm" / "1" / "model.json").read_text())
    assert {k: doc[k] for k in EXTRA} == EXTRA and doc["dtype"] == "float16"
    assert set(doc) <= engine_args_of_image("nvcr.io/nvidia/tritonserver:25.12-vllm-python-py3")
    # an fp8 KV cache holds twice the tokens of the 16-bit one in the memory plan
    fp8, half = (
        json.loads(cli("plan", p, "--json").stdout)["models"][0]["extras"]["memory_plan"]
        for p in (path, plain)
    )
    assert 2 * fp8["kv_bytes_per_token"] == half["kv_bytes_per_token"]


def test_a_field_the_images_vllm_lacks_is_a_recipe_error_with_did_you_mean(cli, tmp_path):
    r = cli("plan", _recipe(tmp_path, "{kv_cache_dtyp: fp8}"))
    assert r.exit_code == 3, r.output
    assert re.search(r"v\.yaml:\d+", r.stderr) and "engine_args.extra.kv_cache_dtyp" in r.stderr
    assert "did you mean kv_cache_dtype" in r.stderr and "Traceback" not in r.output


def test_a_field_only_newer_vllms_have_names_the_images_that_have_it(cli, tmp_path):
    """A field of 0.27.1's AsyncEngineArgs (26.08) that 0.11.1's (25.12, the default image) lacks."""
    new, old = (set(vllm_versions()[v]["AsyncEngineArgs"]) for v in ("0.27.1", "0.11.1"))
    field = sorted(new - old)[0]
    # a value of the field's recorded type (0.22.1's: the newest whose types are recorded)
    accepts = vllm_versions()["0.22.1"]["types"].get(field, {"accepts": ["null"]})["accepts"]
    samples = {
        "null": None,
        "bool": False,
        "int": 0,
        "float": 0.0,
        "str": "x",
        "list": [],
        "dict": {},
    }
    first = accepts[0]
    value = first["literal"][0] if isinstance(first, dict) else samples.get(first)
    path = _recipe(tmp_path, json.dumps({field: value}))
    r = cli("plan", path)
    assert (
        r.exit_code == 3 and f"engine_args.extra.{field}" in r.stderr and "vLLM 0.11.1" in r.stderr
    )
    assert "26.08 (vLLM 0.27.1)" in r.stderr
    path.write_text(
        path.read_text()
        + "image: {triton_image: 'nvcr.io/nvidia/tritonserver:26.08-vllm-python-py3'}\n"
    )
    assert cli("plan", path).exit_code == 0


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ("{dtype: float16}", "move it to engine_args.dtype"),
        ("{max_model_len: 128}", "move it to engine_args.max_model_len"),
        ("{model: /elsewhere}", "checkpoint.path"),
        ("{max_lora_rank: 64}", "lora.max_lora_rank"),
        ("{enable_lora: true}", "lora.adapters"),
        ("{speculative_config: {method: eagle}}", "set speculative"),
        ("{extra: {}}", "no recorded vLLM has extra"),
    ],
)
def test_typed_and_owned_fields_cannot_be_set_through_extra(cli, tmp_path, extra, says):
    r = cli("plan", _recipe(tmp_path, extra))
    assert r.exit_code == 3, r.output
    assert says in r.stderr and "engine_args.extra." in r.stderr


def test_the_schema_takes_extra_as_an_object_of_json_values():
    from tritonbuild.backends.vllm.recipe import VLLMEngineArgs

    prop = VLLMEngineArgs.model_json_schema()["properties"]["extra"]
    assert prop["type"] == "object" and "AsyncEngineArgs" in prop["description"]


def test_the_memory_plans_kv_bytes_per_token_means_the_whole_model_on_both_runtimes(cli, tmp_path):
    """kv_bytes_per_token is the whole model's (as on the TensorRT-LLM routes), kv_bytes_per_token_per_gpu one
    GPU's: at tensor_parallel_size 2 the first is twice the second (tiny-llama's KV heads split evenly)."""
    from tests.conftest import EXAMPLES
    from tritonbuild.backends.llm.memory import Architecture, kv_bytes_per_token

    config = json.loads((EXAMPLES / "tiny-llama" / "config.json").read_text())
    path = _recipe(tmp_path, "{}")
    path.write_text(
        path.read_text().replace("  seed: 0\n", "  seed: 0\n  tensor_parallel_size: 2\n")
    )
    r = cli("plan", path, "--json")
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)["models"][0]["extras"]["memory_plan"]
    arch = Architecture.from_hf_config(config)
    assert (
        plan["kv_bytes_per_token"]
        == kv_bytes_per_token(arch, "auto")
        == 2 * plan["kv_bytes_per_token_per_gpu"]
    )


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ('{max_num_batched_tokens: "lots"}', ("'lots'", "int or null")),
        ('{enable_chunked_prefill: "sometimes"}', ("'sometimes'", "bool or null")),
        ("{kv_cache_dtype: fp9}", ("'fp9'", "one of auto")),
        ("{max_cpu_loras: 1.5}", ("1.5", "int or null")),
    ],
)
@pytest.mark.parametrize("tag", [None, "26.06"])  # vLLM 0.11.1, and 0.22.1 (types not recorded)
def test_a_value_the_field_does_not_take_is_a_recipe_error_at_its_line(
    cli, tmp_path, extra, words, tag
):
    """The types are recorded from the wheel (facts/vllm_engine_args.json `types`); an image whose vLLM's types
    are not recorded refuses a value no recorded vLLM takes."""
    path = _recipe(tmp_path, extra, tag)
    key = extra.strip("{").split(":")[0]
    r = cli("plan", path)
    assert r.exit_code == 3, r.output
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "extra:" in text)
    assert f"v.yaml:{line}" in r.stderr and f"engine_args.extra.{key}" in r.stderr, r.stderr
    for word in words:
        assert word in r.stderr, (word, r.stderr)
    assert "Traceback" not in r.output


def test_the_recorded_types_are_the_wheels_annotations():
    """What the builder checks is what the facts recorded from each wheel, field by field."""
    from tritonbuild.backends.vllm.extra import TYPES

    assert TYPES and set(TYPES) <= set(vllm_versions())
    for version, types in TYPES.items():
        fact = vllm_versions()[version]["types"]
        assert types == {field: t["accepts"] for field, t in fact.items()}
        assert set(fact) == set(vllm_versions()[version]["AsyncEngineArgs"])
    assert (
        vllm_versions()["0.22.0"]["types"]["max_num_batched_tokens"]["annotation"] == "int | None"
    )
