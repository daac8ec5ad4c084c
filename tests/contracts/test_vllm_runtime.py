"""The vLLM path against what vLLM 0.22.0, compressed-tensors 0.15.0.1 and vllm_backend r26.01 do
(facts/vllm_runtime.json), and against what the H200 run measured (docs/runs/2026-12-01-vllm-h200.json): the INT4
checkpoint's packing and names, the recipe's quantization choices and their match with the checkpoint, the
memory plan within 5 % of vLLM's own KV figures, and the requests verify records goldens for."""

from __future__ import annotations

import json
import typing

import numpy as np
import pytest

from benchmarks.vllm import tiny_llama
from tests.conftest import ROOT
from tests.contracts.facts import engine_args_of_image, load, vllm_of_image, vllm_versions
from tritonbuild.backends import REGISTRY
from tritonbuild.backends.vllm import backend as vllm
from tritonbuild.backends.vllm import emit
from tritonbuild.backends.vllm.recipe import VLLMEngineArgs, VLLMRecipe
from tritonbuild.recipe.load import load_recipe

FACTS = load("vllm_runtime")
BENCH = ROOT / "benchmarks" / "vllm"
RUN = json.loads((ROOT / "docs" / "runs" / "2026-12-01-vllm-h200.json").read_text())


def test_int4_packing_is_compressed_tensors_pack_to_int32():
    example = FACTS["compressed_tensors"]["example"]
    q = np.array(example["int8"], dtype=np.int8)
    packed = tiny_llama.pack_int4(q)
    assert packed.dtype == np.int32 and packed.tolist() == example["packed_int32"]
    assert np.array_equal(tiny_llama.unpack_int4(packed, q.shape), q)


def test_int4_checkpoint_holds_the_parameters_vllm_registers():
    fp16 = tiny_llama.tensors(tiny_llama.CONFIG)
    int4 = tiny_llama.int4_tensors(fp16)
    names = FACTS["compressed_tensors"]["vllm_parameters"]["names"]
    prefix = "model.layers.0.mlp.down_proj"
    out, inp = fp16[f"{prefix}.weight"].shape
    assert {f"{prefix}.{n}" for n in names} <= set(int4) and f"{prefix}.weight" not in int4
    assert int4[f"{prefix}.weight_packed"].shape == (out, inp // 8)
    assert int4[f"{prefix}.weight_scale"].shape == (out, inp // tiny_llama.GROUP)
    assert int4[f"{prefix}.weight_shape"].tolist() == [out, inp]
    assert int4["lm_head.weight"].dtype == np.float16  # ignore: [lm_head], as the config says
    deq = tiny_llama.dequantize(
        int4[f"{prefix}.weight_packed"], int4[f"{prefix}.weight_scale"], (out, inp)
    )
    scale = np.repeat(int4[f"{prefix}.weight_scale"].astype(np.float32), tiny_llama.GROUP, axis=1)
    # round to nearest: within half a step, plus the fp16 rounding of the scale itself (max|w| / 7.5 → 7.5 steps)
    assert np.all(
        np.abs(deq - fp16[f"{prefix}.weight"].astype(np.float32)) <= scale * (0.5 + 7.5 * 2.0**-11)
    )


def test_checkpoints_are_deterministic_and_readable(tmp_path):
    first, second = tiny_llama.write_all(tmp_path / "a"), tiny_llama.write_all(tmp_path / "b")
    for kind in ("fp16", "int4"):
        assert (first[kind] / "model.safetensors").read_bytes() == (
            second[kind] / "model.safetensors"
        ).read_bytes()
        back = tiny_llama.read_safetensors(first[kind] / "model.safetensors")
        assert back["model.embed_tokens.weight"].dtype == np.float16
    config = json.loads((first["int4"] / "config.json").read_text())
    assert config["quantization_config"]["quant_method"] == "compressed-tensors"
    assert config["quantization_config"]["format"] == "pack-quantized"


def test_recipe_quantization_choices_are_vllm_methods():
    literal, _none = typing.get_args(VLLMEngineArgs.model_fields["quantization"].annotation)
    methods = set(FACTS["vllm"]["quantization_methods"]["values"])
    versions = load("vllm_engine_args")["versions"].values()
    recorded = set().union(*(v["quantization_methods"]["values"] for v in versions))
    assert (
        "compressed-tensors" in typing.get_args(literal)
        and methods <= set(typing.get_args(literal)) == recorded
    )


@pytest.mark.parametrize(
    "recipe", ["tiny-llama-fp16.yaml", "tiny-llama-int4.yaml", "llama-3-8b.yaml"]
)
def test_benchmark_model_json_is_a_subset_of_async_engine_args(recipe):
    """Keys of the vLLM the recipe's image ships, and of the vLLM the benchmark ran with on the H200."""
    r = load_recipe(BENCH / recipe, REGISTRY.recipe_kinds()).recipe
    doc = emit.model_json(r)
    assert set(doc) <= engine_args_of_image(r.image.triton_image)
    assert set(doc) <= set(vllm_versions()[FACTS["vllm"]["source"]["version"]]["AsyncEngineArgs"])


def _bench(tmp_path, recipe: str, **engine_args):
    tiny_llama.write_all(tmp_path / "checkpoints")
    # NOTE: without the recipe's image line: each test names the image it is about (default: the recipes' default)
    text = "".join(
        line
        for line in (BENCH / recipe).read_text().splitlines(keepends=True)
        if not line.startswith("image:")
    )
    for key, value in engine_args.items():
        text = text.replace("  seed: 0\n", f"  seed: 0\n  {key}: {value}\n")
    path = tmp_path / recipe
    path.write_text(text.replace("verify: {goldens: goldens/", "verify: {goldens: g/"))
    return path


def test_plan_refuses_a_quantization_the_checkpoint_does_not_have(cli, tmp_path):
    """vLLM raises at load when `quantization` differs from the checkpoint's quant_method (facts); the plan says
    so first, naming both."""
    path = _bench(tmp_path, "tiny-llama-int4.yaml")
    path.write_text(
        path.read_text().replace("quantization: compressed-tensors", "quantization: gptq")
    )
    r = cli("plan", path)
    assert r.exit_code == 4 and "'gptq'" in r.output and "compressed-tensors" in r.output
    fp16 = _bench(tmp_path, "tiny-llama-fp16.yaml", quantization="awq")
    r = cli("plan", fp16)
    assert r.exit_code == 4 and "no quantization_config" in r.output


@pytest.mark.parametrize(
    "recipe,measured",
    [
        ("tiny-llama-fp16.yaml", "tiny-llama-fp16"),
        ("tiny-llama-int4.yaml", "tiny-llama-int4"),
        ("llama-3-8b.yaml", "llama-3-8b"),
    ],
)
def test_memory_plan_is_within_5_percent_of_vllms_kv_cache_on_the_h200(
    cli, tmp_path, recipe, measured
):
    path = _bench(tmp_path, recipe)
    r = cli("plan", path, "--json")
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)["models"][0]["extras"]["memory_plan"]
    real = RUN["memory_plan_vs_vllm"][measured]["vllm_kv_cache_tokens"]
    assert plan["max_kv_tokens"] == plan["kv_blocks"] * plan["block_size"]
    assert abs(plan["max_kv_tokens"] - real) / real <= 0.05, (plan["max_kv_tokens"], real)


def test_golden_requests_are_the_openai_frontends_vllm_requests():
    model = type(
        "M",
        (),
        {
            "verify": VLLMRecipe(
                name="m", version=1, backend="vllm", checkpoint={"path": "c"}
            ).verify
        },
    )()
    samples = vllm.golden_inputs(model)
    client = load("clients")["openai_frontend_vllm"]["always"]
    declared = {t.name: t for t in emit.INPUTS}
    assert len(samples) == 2 * model.verify.samples and {bool(s["stream"][0]) for s in samples} == {
        False,
        True,
    }
    for sample in samples:
        for name, (dtype, shape) in client.items():
            assert sample[name].dtype == np.dtype(dtype) and list(sample[name].shape) == shape
        assert set(sample) <= set(declared)
        params = json.loads(sample["sampling_parameters"][0])
        assert (
            params["temperature"] == 0 and params["logprobs"] == 0
        )  # greedy; the chosen token's log-prob


def test_h200_script_patches_the_import_vllm_0_22_removed():
    fact = FACTS["vllm_backend"]["import_removed_in_vllm_0_22"]
    script = (BENCH / "h200.sh").read_text()
    assert f"s/^{fact['line']}/from vllm.inputs import TokensPrompt/" in script
    assert f"r{FACTS['vllm_backend']['source']['branch'][1:]}" in script
    assert f"{FACTS['vllm']['batch_invariant_env']['name']}=1" in script
    assert f"export {FACTS['vllm']['flashinfer_sampler_env']['name']}=0" in script


def test_lora_adapters_become_what_the_vllm_backend_and_the_openai_frontend_read(cli, tmp_path):
    """lora.adapters: model.json says enable_lora (an AsyncEngineArgs field, read as the backend reads it), and
    multi_lora.json sits beside it (vllm_backend _setup_lora) mapping each name to the packaged adapter where
    the server sees it; the OpenAI frontend lists the same names (clients.json)."""
    facts = load("vllm_backend")["lora"]
    path = _bench(tmp_path, "tiny-llama-fp16.yaml")
    for name in ("fr", "de"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "adapter_config.json").write_text(
            json.dumps({"r": 8, "peft_type": "LORA", "id": name})
        )
        (tmp_path / name / "adapter_model.safetensors").write_bytes(name.encode() * 8)
    mount = tmp_path / "OUT"
    text = path.read_text()
    path.write_text(
        text.replace("repository_mount: /models", f"repository_mount: {mount}")
        if "repository_mount" in text
        else text + f"serving: {{repository_mount: {mount}}}\n"
    )
    with path.open("a") as f:
        f.write(
            f"lora:\n  adapters: {{fr: {tmp_path / 'fr'}, de: {tmp_path / 'de'}}}\n  max_lora_rank: 8\n"
        )
    r = cli("build", path, "-o", mount)
    assert r.exit_code == 0, r.output
    (model,) = [d for d in mount.iterdir() if d.is_dir()]
    version = model / "1"
    doc = json.loads((version / "model.json").read_text())
    for (
        v
    ) in vllm_versions().values():  # enable_lora and the two limits: fields of every recorded vLLM
        assert set(doc) <= set(v["AsyncEngineArgs"]), v["source"]["version"]
    assert str(doc[facts["enable_key"]]).lower() == "true" and doc["max_lora_rank"] == 8
    table = json.loads((version / facts["table"]).read_text())
    assert set(table) == {"fr", "de"}
    for name, where in table.items():
        assert (tmp_path / name / "adapter_config.json").read_bytes() == (
            mount / where[len(str(mount)) + 1 :] / "adapter_config.json"
        ).read_bytes()
    frontend = load("clients")["openai_frontend"]["lora"]
    assert frontend["table"].endswith(
        f"/<version>/{facts['table']}"
    )  # the frontend reads the same file
    from tritonbuild.repository.rules import check_model_dir

    assert {f.check: f for f in check_model_dir(model)}["vllm"].ok
    (version / facts["table"]).unlink()
    finding = {f.check: f for f in check_model_dir(model)}["vllm"]
    expected = facts["missing_table_error"].format(path=version / facts["table"])
    assert not finding.ok and expected in finding.detail


def test_a_lora_adapter_that_is_not_peft_is_a_plan_error(cli, tmp_path):
    path = _bench(tmp_path, "tiny-llama-fp16.yaml")
    (tmp_path / "fr").mkdir()
    (tmp_path / "fr" / "weights.bin").write_bytes(b"w")
    with path.open("a") as f:
        f.write(f"lora:\n  adapters: {{fr: {tmp_path / 'fr'}}}\n")
    r = cli("build", path, "-o", tmp_path / "OUT")
    assert (
        r.exit_code == 4
        and "LoRA adapter 'fr'" in r.output
        and "no adapter_config.json" in r.output
    )
    assert not (tmp_path / "OUT").exists()


@pytest.mark.parametrize("method", ["draft_model", "eagle3"])
def test_speculative_decoding_is_model_jsons_speculative_config(cli, tmp_path, method):
    """speculative: model.json's speculative_config (an AsyncEngineArgs field) holds SpeculativeConfig's fields
    with a method the image's vLLM accepts (facts/vllm_speculative.json, read from its wheel), and model
    names the packaged draft where the server sees it; the draft's weights join the model's in the memory plan."""
    facts = load("vllm_speculative")["versions"]
    path = _bench(tmp_path, "tiny-llama-fp16.yaml")
    mount = tmp_path / "OUT"
    text = path.read_text()
    path.write_text(
        text.replace("repository_mount: /models", f"repository_mount: {mount}")
        if "repository_mount" in text
        else text + f"serving: {{repository_mount: {mount}}}\n"
    )
    plain = json.loads(cli("plan", path, "--json").stdout)["models"][0]["extras"]["memory_plan"]
    import shutil

    import yaml

    ckpt = (path.parent / yaml.safe_load(path.read_text())["checkpoint"]["path"]).resolve()
    shutil.copytree(ckpt, tmp_path / "draft")
    with path.open("a") as f:  # an image whose vLLM runs draft_model (vllm_draft.json)
        f.write(
            f"speculative: {{method: {method}, num_speculative_tokens: 3, model: {tmp_path / 'draft'}}}\n"
            "image: {triton_image: 'nvcr.io/nvidia/tritonserver:26.07-vllm-python-py3'}\n"
        )
    planned = json.loads(cli("plan", path, "--json").stdout)["models"][0]["extras"]["memory_plan"]
    assert planned["weight_bytes"] == 2 * plain["weight_bytes"] > 0
    # the drafter's attention layers take KV blocks beside the target's (vllm_draft.json draft_layers)
    assert planned["kv_bytes_per_token"] == 2 * plain["kv_bytes_per_token"] > 0
    r = cli("build", path, "-o", mount)
    assert r.exit_code == 0, r.output
    (model,) = [d for d in mount.iterdir() if d.is_dir()]
    spec = json.loads((model / "1" / "model.json").read_text())["speculative_config"]
    for (
        version,
        v,
    ) in facts.items():  # every recorded vLLM: speculative_config as its AsyncEngineArgs has it
        assert ("speculative_config" in vllm_versions()[version]["AsyncEngineArgs"]) is v[
            "speculative_config"
        ]
        assert not v["speculative_config"] or set(spec) <= set(v["fields"]), version
    v = facts[
        vllm_of_image("nvcr.io/nvidia/tritonserver:26.07-vllm-python-py3")
    ]  # triton_images.json
    assert spec["method"] in v["methods"] and v["draft_model"]["runs"] is True
    assert spec["num_speculative_tokens"] == 3 and spec["model"] == f"{mount}/{model.name}/1/draft"
    assert (model / "1" / "draft" / "config.json").read_bytes() == (
        ckpt / "config.json"
    ).read_bytes()


def test_draft_facts_agree_with_the_speculative_facts_of_each_wheel():
    """vllm_draft.json (read by hand from each wheel once) and vllm_speculative.json (derived by the refresh from the
    same wheels) say the same of each version's draft_model, and the drafter's attention layers the refresh found
    (drafter_kv, EAGLE's proposer) lie in the lines read by hand."""
    spec, compared = load("vllm_speculative")["versions"], []
    for version, f in load("vllm_draft")["versions"].items():
        assert spec[version]["draft_model"]["runs"] is f["draft_model_runs"], version
        assert spec[version]["source"]["wheel_sha256"] == f["source"]["wheel_sha256"], version
        if "drafter_kv" not in spec[version]:
            continue
        path, lines = f["draft_layers"].split(" ")[0].split(":")
        first, last = map(int, lines.split("-"))
        derived = spec[version]["drafter_kv"]["proposers"]["EagleProposer"]["layers"]
        assert (
            derived.split(":")[0] == path
            and first <= int(derived.split(":")[1].split("-")[0]) <= last
        )
        compared.append(version)
    assert (
        compared
    )  # 0.11.1 (EagleProposer.load_model), 0.22.0 and 0.22.1 (the base proposer's load_model)


def test_the_drafters_with_kv_are_read_from_the_shipped_speculative_facts(monkeypatch):
    """The memory plan adds a drafter's attention layers for the methods whose proposer collects them in a
    recorded vLLM (vllm_speculative.json drafter_kv): draft_model, eagle, eagle3 -- not medusa's heads. The
    builder keeps no list of its own: what the facts say is what it reads."""
    import copy

    from tritonbuild.backends.vllm import speculative
    from tritonbuild.core import facts

    versions = load("vllm_speculative")["versions"].values()
    derived = {m for v in versions for m in v.get("drafter_kv", {}).get("methods", [])}
    assert (
        speculative.with_draft_kv()
        == {"draft_model", "eagle", "eagle3"}
        == derived & set(speculative.METHODS)
    )
    shipped, load_fact = copy.deepcopy(facts.load("vllm_speculative")), facts.load
    shipped["versions"]["0.22.0"]["drafter_kv"]["methods"].append("medusa")
    monkeypatch.setattr(
        facts, "load", lambda n: shipped if n == "vllm_speculative" else load_fact(n)
    )
    assert "medusa" in speculative.with_draft_kv()


@pytest.mark.parametrize(
    ("tag", "code"), [("25.12", 3), ("26.01", 3), ("26.02", 0), ("26.03", 0), ("26.07", 0)]
)
def test_a_draft_model_on_an_image_whose_vllm_refuses_it_is_a_recipe_error(
    cli, tmp_path, tag, code
):
    """vLLM 0.11.1 (the 25.12 image, the default) and 0.13.0 (26.01) raise NotImplementedError for method
    draft_model at engine start; 0.15.1 (26.02), 0.17.1 (26.03) and 0.24.0 (26.07) run it (vllm_speculative.json,
    from each wheel). The refusal names the images that run it, newest first."""
    import shutil

    import yaml

    path = _bench(tmp_path, "tiny-llama-fp16.yaml")
    ckpt = (path.parent / yaml.safe_load(path.read_text())["checkpoint"]["path"]).resolve()
    shutil.copytree(ckpt, tmp_path / "draft")
    with path.open("a") as f:
        f.write(
            f"speculative: {{method: draft_model, num_speculative_tokens: 3, model: {tmp_path / 'draft'}}}\n"
            f"image: {{triton_image: 'nvcr.io/nvidia/tritonserver:{tag}-vllm-python-py3'}}\n"
        )
    r = cli("plan", path)
    assert r.exit_code == code, r.output
    if code:
        assert (
            "speculative.method" in r.stderr and "draft_model" in r.stderr and "eagle" in r.stderr
        )
        assert (
            "26.08 (vLLM 0.27.1), 26.07 (vLLM 0.24.0)" in r.stderr
            and "26.02 (vLLM 0.15.1)" in r.stderr
        )
        assert "Traceback" not in r.output and "or newer" not in r.output


def test_medusa_heads_add_weights_and_no_kv(cli, tmp_path):
    """Medusa's heads have no attention layers (vllm_draft.json _about): the plan adds their weights only."""
    import shutil

    import yaml

    path = _bench(tmp_path, "tiny-llama-fp16.yaml")
    plain = json.loads(cli("plan", path, "--json").stdout)["models"][0]["extras"]["memory_plan"]
    ckpt = (path.parent / yaml.safe_load(path.read_text())["checkpoint"]["path"]).resolve()
    shutil.copytree(ckpt, tmp_path / "heads")
    with path.open("a") as f:
        f.write(
            f"speculative: {{method: medusa, num_speculative_tokens: 3, model: {tmp_path / 'heads'}}}\n"
        )
    planned = json.loads(cli("plan", path, "--json").stdout)["models"][0]["extras"]["memory_plan"]
    assert planned["weight_bytes"] == 2 * plain["weight_bytes"] > 0
    assert planned["kv_bytes_per_token"] == plain["kv_bytes_per_token"]
