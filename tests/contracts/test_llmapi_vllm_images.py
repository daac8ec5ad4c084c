"""model.yaml ⊆ the LLM-API arguments of its backend, model.json ⊆ vLLM's AsyncEngineArgs, and the serving
image ships the TensorRT-LLM the engine is built with (facts/llm_args.json, vllm_engine_args.json,
triton_images.json)."""

from __future__ import annotations

import re
import typing

import pytest

from tests.conftest import ROOT
from tests.contracts.facts import engine_args_of_image, load, vllm_of_image
from tritonbuild.backends import REGISTRY
from tritonbuild.backends.tensorrtllm.checks.recipe import check_recipe as check_llm_rules
from tritonbuild.backends.tensorrtllm.llmapi.emit import model_yaml
from tritonbuild.backends.tensorrtllm.recipe.model import Image, LLMRecipe
from tritonbuild.backends.vllm import backend as vllm
from tritonbuild.backends.vllm import emit
from tritonbuild.backends.vllm.recipe import VLLMEngineArgs, VLLMRecipe
from tritonbuild.recipe.load import load_recipe

ARGS = load("llm_args")
VLLM = load("vllm_engine_args")
IMAGES = load("triton_images")["images"]


def _pt(**kw) -> LLMRecipe:
    return LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        runtime="pytorch",
        checkpoint={"path": "c"},
        **kw,
    )


@pytest.mark.parametrize(
    "kw",
    [
        {"quantization": "none"},
        {"quantization": "fp8"},
        {"quantization": "int4_awq"},
        {"quantization": "fp8", "kv_cache": {"dtype": "fp8", "max_tokens": 4096}},
        {"quantization": "none", "serving": {"streaming": True}},
        {
            "quantization": "none",
            "kv_cache": {"max_attention_window_size": [512], "sink_token_length": 4},
            "executor": {"iter_stats_max_iterations": 10, "request_stats_max_iterations": 5},
        },
        {
            "quantization": "none",
            "serving": {"guided_decoding": {"backend": "llguidance"}},
            "lora": {"adapters": {"fr": "a"}, "max_lora_rank": 16, "max_cpu_loras": 2},
        },
    ],
)
def test_model_yaml_is_a_subset_of_torch_llm_args(kw):
    r = _pt(**kw)
    if check_llm_rules(r):
        pytest.skip("refused at load")
    spec = model_yaml(r, ["fr"] if r.lora else [])
    allowed = set(ARGS["TorchLlmArgs"]) | set(ARGS["model_yaml_triton_keys"]["keys"])
    assert set(spec) <= allowed, set(spec) - allowed
    assert not set(spec) & set(ARGS["TrtLlmArgs_only"]["fields"]), "rejected by _TorchLLM at load"
    assert spec["backend"] == "pytorch"
    assert set(spec["kv_cache_config"]) <= set(ARGS["KvCacheConfig"]["fields"])
    dtype = spec["kv_cache_config"].get("dtype", "auto")
    assert dtype == "auto" or dtype in ARGS["KvCacheConfig"]["dtype_synced_to_quant_config"]


def test_pytorch_runtime_refuses_a_kv_dtype_the_llm_api_cannot_apply():
    problems = check_llm_rules(_pt(quantization="none", kv_cache={"dtype": "int8"}))
    assert [p for p in problems if tuple(p[0]) == ("kv_cache", "dtype")]


def test_llmapi_defaults_follow_upstream():
    kv = model_yaml(_pt(quantization="none"))["kv_cache_config"]
    for key, value in ARGS["KvCacheConfig"]["defaults"].items():
        if key in kv and key != "free_gpu_memory_fraction":
            assert kv[key] == value, key


@pytest.mark.parametrize("path", sorted((ROOT / "recipes").rglob("*vllm*.yaml")))
def test_model_json_is_a_subset_of_the_images_async_engine_args(path):
    """vllm_backend does AsyncEngineArgs(**model.json) with the vLLM the serving image ships."""
    r = load_recipe(path, REGISTRY.recipe_kinds()).recipe
    fields = engine_args_of_image(r.image.triton_image)
    doc = emit.model_json(r)
    assert set(doc) <= fields, set(doc) - fields
    quant = VLLM["versions"][vllm_of_image(r.image.triton_image)]["quantization_methods"]["values"]
    assert doc.get("quantization") in (None, *quant)


def _full_vllm_recipe(image: str) -> VLLMRecipe:
    return VLLMRecipe(
        name="v",
        version=1,
        backend="vllm",
        checkpoint={"path": "c"},
        image={"triton_image": image},
        engine_args={
            "max_model_len": 4096,
            "max_num_seqs": 8,
            "enable_prefix_caching": False,
            "quantization": "awq",
            "enforce_eager": True,
        },
        lora={"adapters": {"a": "a"}, "max_lora_rank": 8, "max_loras": 2},
    )


@pytest.mark.parametrize("version", sorted(VLLM["versions"]))
def test_every_key_tritonbuild_writes_is_a_field_of_each_recorded_vllm_or_refused(version):
    """Every model.json key tritonbuild can write (all engine_args set, LoRA on), per recorded vLLM: a field of
    that version's AsyncEngineArgs, or refused at load for each image shipping it, naming the key and version."""
    from tritonbuild.backends.vllm.versions import BY_VERSION, ENGINE_ARGS

    fields = set(VLLM["versions"][version]["AsyncEngineArgs"])
    assert ENGINE_ARGS[version] == fields
    for tag in VLLM["versions"][version]["images"] or ["25.12"]:
        r = _full_vllm_recipe(f"nvcr.io/nvidia/tritonserver:{tag}-vllm-python-py3")
        doc = emit.model_json(r)
        refused = [p for p in vllm.BACKEND.check_recipe(r) if "AsyncEngineArgs" in p[1]]
        if vllm_of_image(r.image.triton_image) == version:
            assert {p[1].split()[3].rstrip(",") for p in refused} == set(doc) - fields, refused
            assert all(f"vLLM {version} " in p[1] for p in refused)
        else:
            assert set(doc) <= fields, set(doc) - fields
    literal, _none = typing.get_args(VLLMEngineArgs.model_fields["quantization"].annotation)
    assert BY_VERSION[version] == set(VLLM["versions"][version]["quantization_methods"]["values"])
    assert BY_VERSION[version] <= set(typing.get_args(literal))


@pytest.mark.parametrize(
    "tag, refused", [("24.12", True), ("25.04", True), ("25.05", False), ("26.07", False)]
)
def test_speculative_config_is_refused_where_the_images_vllm_lacks_it(tag, refused):
    """speculative_config entered AsyncEngineArgs in vLLM 0.8 (24.12-25.04 ship 0.5.5-0.8.1, which lack it)."""
    r = VLLMRecipe(
        name="v",
        version=1,
        backend="vllm",
        checkpoint={"path": "c"},
        image={"triton_image": f"nvcr.io/nvidia/tritonserver:{tag}-vllm-python-py3"},
        speculative={"method": "draft_model", "num_speculative_tokens": 2, "model": "d"},
    )
    fields = set(VLLM["versions"][vllm_of_image(r.image.triton_image)]["AsyncEngineArgs"])
    assert ("speculative_config" not in fields) is refused
    problems = [p for p in vllm.BACKEND.check_recipe(r) if p[0] == ("speculative",)]
    assert bool(problems) is refused
    if refused:
        assert "speculative_config" in problems[0][1] and "AsyncEngineArgs" in problems[0][1]


SPECULATIVE = load("vllm_speculative")


def _tags_named(hint: str) -> list[str]:
    return re.findall(r"(\d\d\.\d\d) \(vLLM ", hint)


def _tags_where(has) -> list[str]:
    """The image tags whose vLLM's recorded speculative facts satisfy has(entry), newest first."""
    from tritonbuild.backends.llm.images import VLLM_IMAGES

    versions = SPECULATIVE["versions"]
    return sorted(
        (
            t
            for t, v in VLLM_IMAGES.items()
            if v in versions and versions[v]["speculative_config"] and has(versions[v])
        ),
        reverse=True,
    )


@pytest.mark.parametrize("method", ["draft_model", "eagle", "eagle3", "medusa"])
@pytest.mark.parametrize("tag", sorted(load("triton_images")["vllm_images"]))
def test_each_images_vllm_decides_the_speculative_method_from_its_own_wheel(tag, method):
    """Every image's vLLM has its SpeculativeConfig recorded (or no speculative_config, or no wheel: said why);
    the method is taken where its wheel's SpeculativeConfig lists it and, for draft_model, its engine runs it
    (vllm_speculative.json draft_model.runs); a refused one is a recipe error naming the images that take it,
    newest first."""
    from tritonbuild.backends.llm.images import VLLM_IMAGES

    version = VLLM_IMAGES[tag]
    fact = SPECULATIVE["versions"].get(version)
    assert fact is not None or tag in SPECULATIVE["unrecorded"][version]["images"], version
    r = VLLMRecipe(
        name="v",
        version=1,
        backend="vllm",
        checkpoint={"path": "c"},
        image={"triton_image": f"nvcr.io/nvidia/tritonserver:{tag}-vllm-python-py3"},
        speculative={"method": method, "num_speculative_tokens": 2, "model": "d"},
    )
    problems = vllm.BACKEND.check_recipe(r)
    if (
        fact is None or not fact["speculative_config"]
    ):  # the key itself is refused (AsyncEngineArgs)
        assert [p[0] for p in problems] == [("speculative",)], problems
        return

    def takes(f: dict) -> bool:
        return method in f["methods"] and (
            method != "draft_model" or f["draft_model"]["runs"] is True
        )

    assert set(fact["fields"]) >= {"method", "model", "num_speculative_tokens"}
    if takes(fact):
        assert problems == [], problems
        return
    ((at, message, hint),) = problems
    assert at == ("speculative", "method") and f"vLLM {version}" in message and method in message
    assert _tags_named(hint) == _tags_where(takes) != [] and "or newer" not in hint


def test_a_key_a_later_vllm_dropped_is_hinted_with_the_images_that_take_it():
    """The hint names the images whose recorded vLLM has the key, newest first: a key an older vLLM took and a
    newer one dropped is no '<oldest> or newer'."""
    from tritonbuild.backends.llm.images import VLLM_IMAGES
    from tritonbuild.backends.vllm.versions import engine_args_problems

    versions = VLLM["versions"]
    newest = max(VLLM_IMAGES)
    dropped = sorted(
        set(versions[VLLM_IMAGES[min(VLLM_IMAGES)]]["AsyncEngineArgs"])
        - set(versions[VLLM_IMAGES[newest]]["AsyncEngineArgs"])
    )
    assert dropped  # the oldest image's vLLM takes keys the newest's no longer does
    ((at, message, hint),) = engine_args_problems({dropped[0]}, IMAGE.format(newest), {dropped[0]})
    assert at == ("engine_args", dropped[0]) and f"vLLM {VLLM_IMAGES[newest]}" in message
    has = sorted(
        (
            t
            for t, v in VLLM_IMAGES.items()
            if v in versions and dropped[0] in versions[v]["AsyncEngineArgs"]
        ),
        reverse=True,
    )
    assert _tags_named(hint) == has and newest not in has and "or newer" not in hint


IMAGE = "nvcr.io/nvidia/tritonserver:{}-vllm-python-py3"


def test_the_builder_reads_the_recorded_wheels_facts_with_no_derived_copy():
    """backends/vllm/versions.py reads the three shipped fact files themselves: no table derived from them is
    written into the package (a refresh writes facts only), and every recorded version is in the builder's."""
    from tests.contracts.facts import PACKAGE_FACTS
    from tritonbuild.backends.vllm.versions import SPECULATIVE as BUILDER_SPECULATIVE
    from tritonbuild.backends.vllm.versions import TABLE

    assert not (PACKAGE_FACTS.parent / "backends" / "vllm" / "versions.json").exists()
    assert {f"vllm_{n}.json" for n in ("engine_args", "quantization", "speculative")} <= {
        p.name for p in PACKAGE_FACTS.glob("*.json")
    }
    assert list(TABLE) == list(VLLM["versions"])
    for version, entry in VLLM["versions"].items():
        assert TABLE[version]["engine_args"] == entry["AsyncEngineArgs"], version
        assert set(TABLE[version]["quantization"]) == set(entry["quantization_methods"]["values"])
    assert set(BUILDER_SPECULATIVE) == {
        v for v, e in SPECULATIVE["versions"].items() if e["speculative_config"]
    }


def test_every_vllm_image_has_its_own_vllm_recorded_or_says_why_not():
    """Each image of the table is checked against the vLLM it ships; a version the registry has no wheel of is
    listed in `unrecorded` with the reason and its images (which take what every recorded version has)."""
    from tritonbuild.backends.llm.images import VLLM_IMAGES

    missing = {tag: v for tag, v in VLLM_IMAGES.items() if v not in VLLM["versions"]}
    assert set(missing.values()) == set(VLLM["unrecorded"]) == {"0.9.0rc1"}
    for version, why in VLLM["unrecorded"].items():
        assert why["why"] and sorted(why["images"]) == sorted(
            t for t, v in missing.items() if v == version
        )
    assert all(
        VLLM_IMAGES[t] in VLLM["versions"] for t in VLLM_IMAGES if t >= "25.08" or t <= "25.05"
    )


def test_the_heads_message_is_the_same_in_every_recorded_vllm():
    """The plan refuses a tensor_parallel_size the heads do not divide quoting vLLM's message (parallelism.json):
    every recorded version raises that same message."""
    message = load("parallelism")["vllm"]["message"]
    assert {v["tp_heads"]["message"] for v in VLLM["versions"].values()} == {message}


def test_the_default_and_the_newest_vllm_images_have_their_engine_args_recorded():
    from tritonbuild.backends.llm.images import VLLM_IMAGES

    default = VLLMRecipe(
        name="v", version=1, backend="vllm", checkpoint={"path": "c"}
    ).image.triton_image
    newest = max(VLLM_IMAGES)
    assert vllm_of_image(default) in VLLM["versions"] and VLLM_IMAGES[newest] in VLLM["versions"]
    for version, v in VLLM["versions"].items():
        assert all(VLLM_IMAGES[tag] == version for tag in v["images"]), version


def test_model_json_leaves_prefix_caching_to_vllms_default():
    r = VLLMRecipe(name="v", version=1, backend="vllm", checkpoint={"path": "c"})
    assert "enable_prefix_caching" not in emit.model_json(r)
    off = {
        version for version, v in VLLM["versions"].items() if v["enable_prefix_caching"] == "False"
    }
    for version, v in VLLM[
        "versions"
    ].items():  # else EngineArgs leaves it unset: vLLM decides at engine creation
        assert version in off or v["enable_prefix_caching"] in (
            "None",
            "CacheConfig.enable_prefix_caching",
        ), version
    assert off == {
        "0.5.5",
        "0.6.3.post1",
    }  # the 24.12 and 25.01 images: off unless the recipe turns it on
    assert "24.12 and 25.01" in VLLMEngineArgs.model_fields["enable_prefix_caching"].description
    on = VLLMRecipe(
        name="v",
        version=1,
        backend="vllm",
        checkpoint={"path": "c"},
        engine_args={"enable_prefix_caching": False},
    )
    assert emit.model_json(on)["enable_prefix_caching"] is False


def _tag(image: str) -> str:
    return re.match(r"nvcr\.io/nvidia/tritonserver:(\d+\.\d+)-trtllm-python-py3$", image).group(1)


def test_default_image_ships_the_default_trtllm_version():
    img = Image()
    assert IMAGES[_tag(img.triton_image)]["trtllm"] == img.trtllm_version


@pytest.mark.parametrize(
    "path",
    sorted(
        p for p in (ROOT / "recipes").rglob("*.yaml") if "backend: tensorrtllm" in p.read_text()
    ),
)
def test_example_recipes_pair_image_and_engine_versions(path):
    r = load_recipe(path, REGISTRY.recipe_kinds()).recipe
    assert IMAGES[_tag(r.image.triton_image)]["trtllm"] == r.image.trtllm_version, path


def test_a_mismatched_image_is_a_recipe_error():
    r = LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        checkpoint={"path": "c"},
        image={
            "trtllm_version": "1.2.1",
            "triton_image": "nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3",
        },
    )
    (problem,) = [p for p in check_llm_rules(r) if p[0][0] == "image"]
    assert "1.1.0" in problem[1] and "1.2.1" in problem[1]


def test_the_code_image_tables_are_the_recorded_ones():
    from tritonbuild.backends.llm.images import TRTLLM_IMAGES, VLLM_IMAGES

    facts = load("triton_images")
    assert {
        tag: (v["trtllm"], v["tensorrt"], v["cuda"]) for tag, v in IMAGES.items()
    } == TRTLLM_IMAGES
    assert {tag: v["vllm"] for tag, v in facts["vllm_images"].items()} == VLLM_IMAGES
    for key in ("source", "vllm_source"):  # repository, commit (not a description), path, lines
        assert (
            re.fullmatch(r"[0-9a-f]{40}", facts[key]["commit"])
            and facts[key]["path"]
            and facts[key]["lines"]
        )


def _image_problems(**image) -> list:
    r = LLMRecipe(name="m", version=1, backend="tensorrtllm", checkpoint={"path": "c"}, image=image)
    return [p for p in check_llm_rules(r) if p[0][0] == "image"]


@pytest.mark.parametrize("tag", sorted(t for t in IMAGES if t >= "26.01"))
def test_every_2026_ngc_trtllm_image_validates_with_the_trtllm_it_ships(tag):
    image = f"nvcr.io/nvidia/tritonserver:{tag}-trtllm-python-py3"
    assert _image_problems(triton_image=image, trtllm_version=IMAGES[tag]["trtllm"]) == []
    (problem,) = _image_problems(triton_image=image, trtllm_version="0.16.0")
    assert (
        IMAGES[tag]["trtllm"] in problem[1]
        and problem[2] == f'set image.trtllm_version: "{IMAGES[tag]["trtllm"]}"'
    )


def test_an_unknown_newer_ngc_tag_is_refused_with_how_to_declare_it():
    image = "nvcr.io/nvidia/tritonserver:27.01-trtllm-python-py3"
    (problem,) = _image_problems(triton_image=image, trtllm_version="1.3.0")
    assert "newer than" in problem[1] and f"{max(IMAGES)}" in problem[1]
    assert "image: {ships: {tensorrt_llm: X, tensorrt: Y, cuda: Z}}" in problem[2]
    assert (
        _image_problems(triton_image=image, trtllm_version="1.3.0", ships={"tensorrt_llm": "1.3.0"})
        == []
    )
    (mismatch,) = _image_problems(
        triton_image=image, trtllm_version="1.2.1", ships={"tensorrt_llm": "1.3.0"}
    )
    assert "ships TensorRT-LLM 1.3.0" in mismatch[1]
    (wrong,) = _image_problems(
        triton_image="nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3",
        trtllm_version="1.2.1",
        ships={"tensorrt_llm": "1.3.0"},
    )
    assert tuple(wrong[0]) == ("image", "ships") and "ships 1.2.1" in wrong[1]


LLMAPI = load("trtllm_llmapi")
# the newest llmapi template recorded (TensorRT-LLM 0a710573: LoRA inputs, perf-metrics input and outputs)
NEWEST = load("tensorrtllm_backend")["templates"]["llmapi_versions"][LLMAPI["template_commit"]]


def _declared(specs) -> dict:
    from tritonbuild.recipe.models import DTYPES

    return {t.name: (DTYPES[t.dtype], list(t.dims), bool(t.optional)) for t in specs}


def _recorded(tensors) -> dict:
    return {t["name"]: (t["data_type"], t["dims"], bool(t.get("optional"))) for t in tensors}


@pytest.mark.parametrize(
    "features",
    [
        {},
        {
            "lora": {"adapters": {"fr": "a"}},
            "serving": {"guided_decoding": {"backend": "xgrammar"}},
        },
    ],
)
def test_llmapi_model_declares_upstreams_llmapi_tensors(features):
    """Every tensor is upstream's LLM-API model's (newest template), except the guide, which upstream's has none of:
    that one is the tensorrtllm backend's (what the OpenAI frontend sends), declared only with guided decoding.
    The older templates (tensorrtllm_backend c2e65b8, TensorRT-LLM c8c6df08) lack LoRA and (c2e65b8) perf metrics:
    an image that ships one of them takes the inputs they have."""
    from tests.contracts.facts import template
    from tritonbuild.backends.tensorrtllm.llmapi.tensors import EXT_INPUTS, OUTPUTS, llm_inputs

    r = _pt(quantization="none", **features)
    ext = {t.name for t in EXT_INPUTS}  # the LLM API's own, checked in test_llm_args.py
    ours, theirs = _declared(llm_inputs(r)), _recorded(NEWEST["inputs"])
    cpp = {k: (v[0], v[1], True) for k, v in _recorded(template("tensorrt_llm")["inputs"]).items()}
    guide = {n for n in ours if n not in theirs and n not in ext}
    assert guide == (
        set(load("clients")["openai_frontend"]["tool_choice_guide"]) - {"lines"}
        if r.serving.guided_decoding
        else set()
    )
    assert all(ours[n] == cpp[n] for n in guide), guide
    assert all(ours[n] == theirs[n] for n in ours if n not in guide | ext)
    assert {n for n, v in ours.items() if not v[2]} == {n for n, v in theirs.items() if not v[2]}
    assert (
        set(LLMAPI["lora"]["inputs"]) <= set(ours)
        if r.lora
        else not set(LLMAPI["lora"]["inputs"]) & set(ours)
    )
    assert _declared(OUTPUTS) == {k: v for k, v in _recorded(NEWEST["outputs"]).items()}
    assert set(LLMAPI["perf_metrics"]["outputs"]) <= set(_declared(OUTPUTS))
    assert f"sampling_param_{LLMAPI['perf_metrics']['sampling_param']}" in ours


def test_llmapi_lora_and_guided_decoding_are_the_llm_apis_own_config():
    """model.yaml: lora_config with LoraConfig's fields (the adapters' directories, the recipe's limits) and
    guided_decoding_backend with one of the LLM API's choices; both TorchLlmArgs fields."""
    r = _pt(
        quantization="none",
        lora={"adapters": {"fr": "a", "de": "b"}, "max_lora_rank": 8, "max_loras": 2},
        serving={"guided_decoding": {"backend": "llguidance"}},
    )
    spec = model_yaml(r, ["fr", "de"])
    assert {"lora_config", "guided_decoding_backend"} <= set(ARGS["TorchLlmArgs"])
    assert set(spec["lora_config"]) <= set(LLMAPI["lora"]["lora_config_fields"])
    assert spec["lora_config"] == {
        "lora_dir": ["lora/de", "lora/fr"],
        "max_lora_rank": 8,
        "max_loras": 2,
    }
    assert spec["guided_decoding_backend"] in LLMAPI["guided_decoding"]["backends"]
    plain = model_yaml(_pt(quantization="none"))
    assert not {"lora_config", "guided_decoding_backend"} & set(plain)
    from tritonbuild.backends.tensorrtllm.llmapi.emit import MAX_LORA_RANK

    assert LLMAPI["lora"]["lora_config_defaults"]["max_lora_rank"] == MAX_LORA_RANK


def test_what_one_route_cannot_do_is_a_recipe_error_naming_the_route_that_can():
    from pydantic import ValidationError

    with pytest.raises(
        ValidationError, match=r"lora\.cache_gpu_memory_fraction needs runtime: engine"
    ):
        _pt(quantization="none", lora={"adapters": {"fr": "a"}, "cache_gpu_memory_fraction": 0.1})
    with pytest.raises(ValidationError, match=r"lora\.max_loras needs runtime: pytorch"):
        LLMRecipe(
            name="m",
            version=1,
            backend="tensorrtllm",
            checkpoint={"path": "c"},
            lora={"adapters": {"fr": "a"}, "max_loras": 8, "target_modules": ["attn_q"]},
        )
    with pytest.raises(ValidationError, match=r"lora\.target_modules needs runtime: engine"):
        _pt(quantization="none", lora={"adapters": {"fr": "a"}, "target_modules": ["attn_q"]})
    with pytest.raises(ValidationError, match="llguidance needs runtime: pytorch"):
        LLMRecipe(
            name="m",
            version=1,
            backend="tensorrtllm",
            checkpoint={"path": "c"},
            serving={"guided_decoding": {"backend": "llguidance"}},
        )
    cpp = load("tensorrtllm_backend")["guided_decoding"]["backends"]
    assert "llguidance" not in cpp and "llguidance" in LLMAPI["guided_decoding"]["backends"]


def test_vllm_models_get_an_image_with_the_vllm_backend():
    r = VLLMRecipe(name="v", version=1, backend="vllm", checkpoint={"path": "c"})
    assert r.image.triton_image.endswith(
        "-vllm-python-py3"
    )  # vllm_backend README: the *-vllm-python-py3 images
    with pytest.raises(ValueError, match="has no vLLM backend"):
        VLLMRecipe(
            name="v",
            version=1,
            backend="vllm",
            checkpoint={"path": "c"},
            image={"triton_image": "nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3"},
        )


def test_vllm_config_declares_the_backends_whole_interface(tmp_path):
    """vllm_backend's auto-complete adds what config.pbtxt lacks; we declare it all, so the manifest, verify and
    a server started with --disable-auto-complete-config see the same interface."""
    from tritonbuild.recipe.models import DTYPES

    upstream = load("vllm_backend")
    for kind, ours in (("inputs", emit.INPUTS), ("outputs", emit.OUTPUTS)):
        mine = {
            t.name: (DTYPES[t.dtype], list(t.dims), bool(getattr(t, "optional", False)))
            for t in ours
        }
        theirs = {
            t["name"]: (t["data_type"], t["dims"], bool(t.get("optional"))) for t in upstream[kind]
        }
        assert mine == theirs, kind
    client = load("clients")["openai_frontend_vllm"]["always"]
    names = {t.name: DTYPES[t.dtype] for t in emit.INPUTS}
    for name, (dtype, _) in client.items():
        assert names[name] == {"object": "TYPE_STRING", "bool": "TYPE_BOOL"}[dtype], name


def test_verify_flags_a_model_yaml_the_pytorch_backend_refuses(cli, tmp_path, in_root):
    """A runtime: pytorch repository built before #9 wrote quant_config: verify names it offline."""
    import shutil

    import yaml

    from tests.conftest import EXAMPLES, llmapi_recipe

    shutil.copytree(EXAMPLES / "tiny-llama", tmp_path / "tiny-llama")
    text = llmapi_recipe(
        (EXAMPLES / "tiny-llama-int4.yaml")
        .read_text()
        .replace("quantization: int4_weight_only", "quantization: none\nruntime: pytorch")
    )
    (tmp_path / "r.yaml").write_text(text)
    out = tmp_path / "OUT"
    assert cli("build", tmp_path / "r.yaml", "-o", out).exit_code == 0
    path = out / "tiny-llama" / "1" / "model.yaml"
    path.write_text(
        yaml.safe_dump({**yaml.safe_load(path.read_text()), "quant_config": {"quant_algo": "FP8"}})
    )
    from tritonbuild.repository.rules import check_model_dir

    bad = {f.check: f.detail for f in check_model_dir(out / "tiny-llama") if not f.ok}
    assert "specific to TensorRT backend" in bad["llmapi"]
    assert set(ARGS["TrtLlmArgs_only"]["fields"]) == {
        "quant_config",
        "calib_config",
        "build_config",
    }


def test_a_2607_recipe_validates_and_a_newer_tag_is_a_recipe_error(cli, tmp_path):
    text = (ROOT / "recipes/examples/tiny-llama-int4.yaml").read_text()
    # validate plans as build does: the checkpoint must be where the recipe says
    checkpoint = ROOT / "recipes/examples/tiny-llama"
    text = text.replace("checkpoint: {path: tiny-llama}", f"checkpoint: {{path: '{checkpoint}'}}")
    ok = text.replace('"1.1.0"', '"1.2.1"').replace(":25.12-trtllm", ":26.07-trtllm")
    (tmp_path / "ok.yaml").write_text(ok)
    r = cli("validate", tmp_path / "ok.yaml")
    assert r.exit_code == 0, r.stderr
    (tmp_path / "new.yaml").write_text(ok.replace(":26.07-trtllm", ":27.01-trtllm"))
    r = cli("validate", tmp_path / "new.yaml")
    assert (
        r.exit_code == 3
        and "new.yaml:" in r.stderr
        and "image.ships" not in r.stderr.split("\n")[0]
    )
    assert (
        "27.01-trtllm-python-py3 is newer than" in r.stderr
        and "ships: {tensorrt_llm: X" in r.stderr
    )
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "kw, route, why",
    [
        ({}, "engine", "INT4 weight-only RTN (W4A16) is built on the engine route only"),
        (
            {"quantization": "none"},
            "pytorch",
            "TensorRT-LLM 1.1.0's default route: the LLM API on its PyTorch backend",
        ),
        (
            {
                "quantization": "none",
                "image": {
                    "trtllm_version": "0.16.0",
                    "triton_image": "nvcr.io/nvidia/tritonserver:24.12-trtllm-python-py3",
                },
            },
            "engine",
            "predates the LLM-API PyTorch backend",
        ),
        (
            {"quantization": "int4_awq"},
            "pytorch",
            "W4A16 AWQ from a checkpoint already quantized, or quantized by "
            "ModelOpt's quantize.py --export_format hf",
        ),
        ({"quantization": "none", "kv_cache": {"dtype": "int8"}}, "engine", "int8 KV cache"),
        (
            {"quantization": "none", "runtime": "engine"},
            "engine",
            "runtime: engine is set in the recipe",
        ),
    ],
)
def test_runtime_auto_takes_the_llm_api_route_where_the_image_and_recipe_allow(kw, route, why):
    fact = ARGS["default_llm"]
    r = LLMRecipe(name="m", version=1, backend="tensorrtllm", checkpoint={"path": "c"}, **kw)
    assert r.runtime == route and why in r.route_why
    from tritonbuild.backends.tensorrtllm.route import LLMAPI_SINCE

    assert (
        ".".join(map(str, LLMAPI_SINCE)) == fact["since"] and fact["backend_default"] == "pytorch"
    )
    assert check_llm_rules(r) == []


@pytest.mark.parametrize(
    "features",
    [
        {},
        {
            "lora": {"adapters": {"fr": "a"}},
            "serving": {"guided_decoding": {"backend": "xgrammar"}},
        },
    ],
)
def test_the_openai_adapter_speaks_the_clients_names_and_upstreams_llmapi_names(features):
    from tests.contracts.facts import template
    from tritonbuild.backends.tensorrtllm.llmapi.adapter import (
        ADAPTER_MAP,
        ADAPTER_PERF,
        adapter_inputs,
        adapter_outputs,
    )
    from tritonbuild.recipe.models import DTYPES

    r = _pt(quantization="none", **features)
    clients = load("clients")
    sent = (
        set(clients["openai_frontend"]["always"])
        | set(clients["openai_frontend"]["optional"])
        | set(clients["genai_perf"]["default"])
        | set(clients["genai_perf"]["streaming"])
    )
    from tritonbuild.backends.tensorrtllm.llmapi.tensors import EXT_INPUTS
    from tritonbuild.backends.tensorrtllm.tensors import CLIENT_ALIASES

    ensemble = {t["name"]: t for t in template("ensemble")["inputs"]}
    ensemble.update(
        {alias: ensemble[name] for alias, name in CLIENT_ALIASES.items()}
    )  # genai-perf's min_length
    for t in adapter_inputs(r):  # upstream's ensemble names, which those clients speak
        assert t.name in ensemble, f"{t.name} is not an input of upstream's ensemble"
        assert (DTYPES[t.dtype], list(t.dims)) == (
            ensemble[t.name]["data_type"],
            ensemble[t.name]["dims"],
        ), t.name
    llmapi = {t["name"]: t for t in NEWEST["inputs"]}
    llmapi.update(
        {t.name: {"data_type": DTYPES[t.dtype]} for t in EXT_INPUTS}
    )  # test_llm_args.py: LLM API facts
    for client_name, target in ADAPTER_MAP.items():
        assert target in llmapi, f"{target} is not an input of upstream's llmapi model"
        assert llmapi[target]["data_type"] == ensemble[client_name]["data_type"], client_name
    declared = {t.name for t in adapter_inputs(r)}
    missing = (
        set(clients["openai_frontend"]["always"]) | set(clients["genai_perf"]["streaming"])
    ) - declared
    assert not missing and sent, f"the clients always send {missing}"
    optional = set(clients["openai_frontend"]["optional"])
    assert (
        {n for n in optional if n.startswith("lora_")} <= declared
        if r.lora
        else not {n for n in declared if n.startswith("lora_")}
    )
    assert (
        {n for n in optional if n.startswith("guided_")} <= declared
        if r.serving.guided_decoding
        else not {n for n in declared if n.startswith("guided_")}
    )
    perf = load("tensorrtllm_backend")["perf_metrics"]
    ens_out = {t["name"]: t for t in template("ensemble")["outputs"]}
    out = {t.name: DTYPES[t.dtype] for t in adapter_outputs()}
    for ours, theirs in ADAPTER_PERF.items():  # the ensemble's perf output ← the llmapi model's
        assert ours in perf["outputs"] and theirs in LLMAPI["perf_metrics"]["outputs"], ours
        assert out[ours] == ens_out[ours]["data_type"] == _recorded(NEWEST["outputs"])[theirs][0]
    assert perf["input"] in declared


def test_a_forced_llm_api_route_on_an_image_before_trtllm_1_0_is_a_recipe_error():
    image = {
        "trtllm_version": IMAGES["25.01"]["trtllm"],
        "triton_image": "nvcr.io/nvidia/tritonserver:25.01-trtllm-python-py3",
    }
    r = LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        runtime="pytorch",
        quantization="none",
        checkpoint={"path": "c"},
        image=image,
    )
    (problem,) = [p for p in check_llm_rules(r) if tuple(p[0]) == ("runtime",)]
    assert "needs TensorRT-LLM 1.0 or newer" in problem[1] and "runtime: engine" in problem[2]


def test_attention_window_sink_tokens_and_stats_reach_the_llm_api_under_its_names():
    spec = model_yaml(
        _pt(
            quantization="none",
            kv_cache={"max_attention_window_size": [512], "sink_token_length": 4},
            executor={"request_stats_max_iterations": 5},
        )
    )
    kv = spec["kv_cache_config"]
    assert kv["max_attention_window"] == [512] and kv["sink_token_length"] == 4
    assert (
        spec["request_stats_max_iterations"] == 5 and "iter_stats_max_iterations" not in spec
    )  # unset: the API's
    assert {"iter_stats_max_iterations", "request_stats_max_iterations"} <= set(
        ARGS["TorchLlmArgs"]
    )
    assert {"max_attention_window", "sink_token_length"} <= set(ARGS["KvCacheConfig"]["fields"])


@pytest.mark.parametrize("mode", ["draft_target", "eagle"])
def test_speculative_decoding_is_the_llm_apis_speculative_config(mode):
    """speculative_config as DecodingBaseConfig.from_dict takes it (llm_args.json speculative_config): a decoding
    type the PyTorch backend runs, base fields only, the draft checkpoint's directory (relative, packaged)."""
    facts = ARGS["speculative_config"]
    r = _pt(
        quantization="none", speculative={"mode": mode, "max_draft_len": 3, "draft_checkpoint": "d"}
    )
    spec = model_yaml(r)
    cfg = spec["speculative_config"]
    assert (
        "speculative_config" in ARGS["TorchLlmArgs"]
        and cfg["decoding_type"] in facts["from_dict_types"]
    )
    assert cfg["decoding_type"] not in facts["not_pytorch"]
    assert set(cfg) - {"decoding_type"} <= set(facts["base_fields"])
    assert cfg == {
        "decoding_type": cfg["decoding_type"],
        "max_draft_len": 3,
        "speculative_model_dir": "draft",
    }
    assert "speculative_config" not in model_yaml(_pt(quantization="none"))


def test_a_speculative_mode_neither_route_generates_is_a_recipe_error():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="medusa"):
        _pt(
            quantization="none",
            speculative={"mode": "medusa", "max_draft_len": 3, "draft_checkpoint": "d"},
        )
