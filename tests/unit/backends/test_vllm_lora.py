"""vLLM's LoRA as its runtime behaves (the package's facts/vllm_lora.json, derived from the vLLM wheels): max_lora_rank
takes only MaxLoRARanks' values (a recipe error), and an adapter whose rank exceeds max_lora_rank (LoRAConfig's
default when unset) is a plan error instead of a server whose every request to it fails."""

from __future__ import annotations

import ast
import copy
import json
import re

import pytest

from tests.conftest import ROOT
from tests.contracts.facts import load, vllm_versions
from tritonbuild.backends.vllm import lora
from tritonbuild.backends.vllm.recipe import VLLMRecipe
from tritonbuild.core import facts

FACT = load("vllm_lora")
DEFAULT_IMAGE = "nvcr.io/nvidia/tritonserver:25.12-vllm-python-py3"  # vLLM 0.11.1


def _recipe(tmp_path, lora: str, tag: str | None = None):
    """The GPU tiny-llama vLLM recipe with a lora section (and the image of tag, when given)."""
    from tests.conftest import EXAMPLES, ROOT

    text = (ROOT / "recipes" / "gpu" / "tiny-llama-vllm.yaml").read_text()
    text = text.replace("../examples/tiny-llama", str(EXAMPLES / "tiny-llama"))
    image = (
        f"image: {{triton_image: 'nvcr.io/nvidia/tritonserver:{tag}-vllm-python-py3'}}\n"
        if tag
        else ""
    )
    (tmp_path / "v.yaml").write_text(text + image + lora)
    return tmp_path / "v.yaml"


def _adapter(tmp_path, name: str, rank: int) -> str:
    (tmp_path / name).mkdir()
    (tmp_path / name / "adapter_config.json").write_text(
        json.dumps({"r": rank, "peft_type": "LORA"})
    )
    (tmp_path / name / "adapter_model.safetensors").write_bytes(b"w" * 8)
    return str(tmp_path / name)


def test_the_ranks_tritonbuild_allows_are_vllms_max_lora_ranks_as_recorded():
    """The builder's ranks are the shipped fact's, version by version, with its default; every recorded vLLM is
    either recorded here or listed as unrecorded (its images take what every recorded version takes)."""
    recorded = FACT["versions"]
    assert lora.recorded() == {
        v: (tuple(f["max_lora_ranks"]), f["default_max_lora_rank"]) for v, f in recorded.items()
    }
    assert set(recorded) | set(FACT["unrecorded"]) == set(vllm_versions()) and not set(
        recorded
    ) & set(FACT["unrecorded"])
    for version, fact in recorded.items():
        assert fact["source"]["version"] == version and fact["source"]["path"] in (
            "vllm/config/lora.py",
            "vllm/config.py",  # before vLLM split its config (0.10)
        )
        assert fact["source"]["wheel_sha256"] == vllm_versions()[version]["source"]["wheel_sha256"]
    schema = VLLMRecipe.model_json_schema()["$defs"]["VLLMLoRA"]["properties"]["max_lora_rank"]
    assert list(lora.RANKS_IN_SOME_RECORDED) in [s.get("enum") for s in schema["anyOf"]]


def test_each_version_names_the_commit_its_wheel_names():
    """The LoRA facts of a wheel name the commit the wheel names, as its engine-args facts do (0.5.5's was
    recorded null by hand although its vllm/commit_id.py names it)."""
    for version, fact in FACT["versions"].items():
        engine = vllm_versions()[version]["source"]
        assert fact["source"]["wheel"] == engine["wheel"], version
        assert fact["source"]["commit"] == engine["commit"], version


def test_the_builder_reads_the_shipped_lora_facts_and_keeps_no_table_of_its_own(monkeypatch):
    """backends/vllm/lora.py holds no ranks of its own (no literal list of ints, no tests/ path): what the
    package's vllm_lora.json says of a version is what a recipe on its image is checked against."""
    tree = ast.parse((ROOT / "builder" / "backends" / "vllm" / "lora.py").read_text())
    literal_ints = [
        ast.unparse(n)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Tuple, ast.List, ast.Set))
        and sum(isinstance(e, ast.Constant) and type(e.value) is int for e in n.elts) >= 2
    ]
    assert literal_ints == []
    assert "tests/contracts" not in ast.get_docstring(tree) + ast.unparse(tree)
    shipped, load_fact = copy.deepcopy(facts.load("vllm_lora")), facts.load
    shipped["versions"]["0.11.1"].update(max_lora_ranks=[8, 24], default_max_lora_rank=8)
    monkeypatch.setattr(facts, "load", lambda n: shipped if n == "vllm_lora" else load_fact(n))
    asked = lora.VLLMLoRA(adapters={"fr": "fr"}, max_lora_rank=24)
    assert lora.rank_problem(asked, DEFAULT_IMAGE) is None
    message, hint = lora.rank_problem(asked.model_copy(update={"max_lora_rank": 16}), DEFAULT_IMAGE)
    assert "max_lora_rank 16 is not a rank vLLM 0.11.1 takes" in message
    assert hint == "use one of 8, 24 (the next above is 24)"
    assert lora._ranks(DEFAULT_IMAGE) == ("vLLM 0.11.1", (8, 24), 8)


@pytest.mark.parametrize(
    "tag", [None, "26.01"]
)  # the default image (vLLM 0.11.1) and 26.01 (0.13.0)
def test_a_max_lora_rank_vllm_does_not_take_is_a_recipe_error(cli, tmp_path, tag):
    path = _recipe(
        tmp_path,
        f"lora:\n  adapters: {{fr: {_adapter(tmp_path, 'fr', 8)}}}\n  max_lora_rank: 24\n",
        tag,
    )
    r = cli("plan", path)
    assert r.exit_code == 3, r.output
    assert re.search(rf"{re.escape(str(path))}:\d+", r.stderr) and "lora.max_lora_rank" in r.stderr
    assert "max_lora_rank 24" in r.stderr and "1, 8, 16, 32, 64, 128, 256, 320, 512" in r.stderr
    assert "next above is 32" in r.stderr and "Traceback" not in r.output
    path.write_text(path.read_text().replace("max_lora_rank: 24", "max_lora_rank: 32"))
    assert cli("plan", path).exit_code == 0


@pytest.mark.parametrize(
    ("setting", "limit", "fix"), [("", 16, 32), ("  max_lora_rank: 8\n", 8, 32)]
)
def test_an_adapter_whose_rank_exceeds_max_lora_rank_is_a_plan_error(
    cli, tmp_path, setting, limit, fix
):
    """vLLM's PEFTHelper.validate_legal refuses it on every request (facts: rank_check); unset, the limit is
    LoRAConfig's default (16)."""
    check = FACT["versions"]["0.22.0"]["rank_check"]
    assert (
        check["where"].startswith("vllm/lora/peft_helper.py:")
        and "greater than max_lora_rank" in check["message"]
    )
    lora = f"lora:\n  adapters: {{fr: {_adapter(tmp_path, 'fr', 8)}, de: {_adapter(tmp_path, 'de', 32)}}}\n"
    path = _recipe(tmp_path, lora + setting)
    r = cli("build", path, "-o", tmp_path / "OUT")
    assert r.exit_code == 4, r.output
    assert "LoRA adapter 'de' has rank 32" in r.stderr and f"is {limit}" in r.stderr
    assert f"set lora.max_lora_rank to {fix}" in r.stderr and re.search(
        rf"{re.escape(str(path))}:\d+", r.stderr
    )
    assert not (tmp_path / "OUT").exists()
    path.write_text(path.read_text().replace(setting, "") + "  max_lora_rank: 32\n")
    assert cli("plan", path).exit_code == 0


def test_an_adapter_above_every_rank_vllm_takes_says_so(cli, tmp_path):
    lora = f"lora:\n  adapters: {{big: {_adapter(tmp_path, 'big', 1024)}}}\n  max_lora_rank: 512\n"
    r = cli("plan", _recipe(tmp_path, lora))
    assert r.exit_code == 4 and "rank 1024" in r.stderr and "at most 512" in r.stderr


@pytest.mark.parametrize(
    ("tag", "rank", "takes"), [("25.10", 1, "8, 16"), ("24.12", 512, "128, 256")]
)
def test_a_rank_the_images_own_vllm_lacks_is_refused(cli, tmp_path, tag, rank, takes):
    """0.10.2 (25.10) has no rank 1 and 0.5.5 (24.12) no 512 (facts: their possible_max_ranks): checked against
    the image's own vLLM, not 0.22's."""
    fact = FACT["versions"][{"25.10": "0.10.2", "24.12": "0.5.5"}[tag]]
    assert rank not in fact["max_lora_ranks"]
    lora = f"lora:\n  adapters: {{fr: {_adapter(tmp_path, 'fr', 1)}}}\n  max_lora_rank: {rank}\n"
    r = cli("plan", _recipe(tmp_path, lora, tag))
    assert r.exit_code == 3 and "lora.max_lora_rank" in r.stderr and takes in r.stderr, r.output
    assert f"max_lora_rank {rank}" in r.stderr and "Traceback" not in r.output


def test_a_rank_on_an_image_whose_vllms_ranks_are_not_recorded_is_refused(cli, tmp_path):
    """25.05 ships vLLM 0.8.4, whose ranks are not recorded: an explicit rank is refused, the default plans."""
    assert "0.8.4" in FACT["unrecorded"]
    lora = f"lora:\n  adapters: {{fr: {_adapter(tmp_path, 'fr', 8)}}}\n  max_lora_rank: 16\n"
    path = _recipe(tmp_path, lora, "25.05")
    r = cli("plan", path)
    assert r.exit_code == 3 and "lora.max_lora_rank" in r.stderr and "not recorded" in r.stderr, (
        r.output
    )
    assert "remove lora.max_lora_rank" in r.stderr
    path.write_text(path.read_text().replace("  max_lora_rank: 16\n", ""))
    assert cli("plan", path).exit_code == 0


@pytest.mark.parametrize("version", ["0.22.0", "0.11.1", "0.10.2", "0.5.5"])
def test_the_max_cpu_loras_rule_is_recorded_for_every_version(version):
    rule = FACT["versions"][version]["max_cpu_loras_rule"]
    assert "must be >=" in rule["text"] and re.search(r"\.py:\d+-\d+$", rule["where"])


def test_the_max_cpu_loras_rule_applies_where_the_images_vllm_has_it(monkeypatch):
    """The cross-key rule is checked on an image whose recorded vLLM has it (every recorded one does), not where
    the shipped facts say its LoRAConfig has no such check."""
    recipe = VLLMRecipe(
        name="v",
        version=1,
        backend="vllm",
        checkpoint={"path": "c"},
        lora={"adapters": {"fr": "fr"}, "max_loras": 2},
        engine_args={"extra": {"max_cpu_loras": 1}},
    )
    assert recipe.image.triton_image == DEFAULT_IMAGE
    assert [p[0] for p in lora.cross_key_problems(recipe)] == [
        ("engine_args", "extra", "max_cpu_loras")
    ]
    shipped, load_fact = copy.deepcopy(facts.load("vllm_lora")), facts.load
    shipped["versions"]["0.11.1"]["max_cpu_loras_rule"] = None
    monkeypatch.setattr(facts, "load", lambda n: shipped if n == "vllm_lora" else load_fact(n))
    assert lora.cross_key_problems(recipe) == []


def test_max_cpu_loras_below_max_loras_is_a_recipe_error(cli, tmp_path):
    """LoRAConfig refuses max_cpu_loras < max_loras at engine start (vllm/config/lora.py, facts max_cpu_loras_rule)."""
    lora = f"lora:\n  adapters: {{fr: {_adapter(tmp_path, 'fr', 8)}}}\n  max_loras: 2\n"
    path = _recipe(tmp_path, lora)
    path.write_text(
        path.read_text().replace("  seed: 0\n", "  seed: 0\n  extra: {max_cpu_loras: 1}\n")
    )
    r = cli("plan", path)
    assert r.exit_code == 3 and "engine_args.extra.max_cpu_loras" in r.stderr, r.output
    assert "below max_loras 2" in r.stderr and re.search(r"v\.yaml:\d+", r.stderr)
    path.write_text(path.read_text().replace("max_cpu_loras: 1", "max_cpu_loras: 2"))
    assert cli("plan", path).exit_code == 0
