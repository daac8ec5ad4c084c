"""The LLM-API stand-in (tests/fixtures/llm/fake_tensorrt_llm) refuses what TensorRT-LLM 1.x refuses for
speculative decoding, each from the recorded fact (facts/llm_args.json speculative_config), and takes what the
generated model gives it: model.yaml's speculative_config for each recipe mode, through
update_llm_args_with_extra_dict as upstream's LLM-API model calls it."""

from __future__ import annotations

import shutil
import sys

import pytest

from tests.conftest import ROOT
from tests.contracts.facts import FACTS, load
from tritonbuild.backends.tensorrtllm.llmapi.emit import model_yaml
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
from tritonbuild.backends.tensorrtllm.speculative import DECODING_TYPES, DISCRIMINATED_TYPES

SPEC = load("llm_args")["speculative_config"]


@pytest.fixture
def trtllm(tmp_path, monkeypatch):
    """The stand-in importable as tensorrt_llm, with its facts beside it (as the live tests install it), and a
    draft checkpoint directory."""
    shutil.copytree(
        ROOT / "tests" / "fixtures" / "llm" / "fake_tensorrt_llm", tmp_path / "tensorrt_llm"
    )
    for facts in ("llm_args.json", "trtllm_llmapi.json"):
        shutil.copy(FACTS / facts, tmp_path / "tensorrt_llm" / facts)
    (tmp_path / "draft").mkdir()
    (tmp_path / "draft" / "config.json").write_text("{}")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "tensorrt_llm" or m.startswith("tensorrt_llm.")]:
        monkeypatch.delitem(sys.modules, name)
    import tensorrt_llm
    from tensorrt_llm.llmapi import llm_args, llm_utils

    yield tensorrt_llm, llm_args, llm_utils, tmp_path
    for name in [m for m in sys.modules if m == "tensorrt_llm" or m.startswith("tensorrt_llm.")]:
        del sys.modules[name]


def _recipe(mode: str, **image) -> LLMRecipe:
    return LLMRecipe(
        name="m",
        version=1,
        backend="tensorrtllm",
        runtime="pytorch",
        checkpoint={"path": "c"},
        quantization="none",
        image=image or {},
        speculative={"mode": mode, "max_draft_len": 3, "draft_checkpoint": "d"},
    )


def _args(tmp_path, speculative_config) -> dict:
    (tmp_path / "ckpt").mkdir(exist_ok=True)
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    return {
        "model": str(tmp_path / "ckpt"),
        "backend": "pytorch",
        "speculative_config": speculative_config,
    }


@pytest.mark.parametrize("mode", sorted(DECODING_TYPES))
def test_model_yamls_speculative_config_loads_through_update_llm_args_with_extra_dict(trtllm, mode):
    module, _, utils, tmp = trtllm
    spec = model_yaml(_recipe(mode))["speculative_config"]
    spec["speculative_model_dir"] = str(tmp / "draft")
    args = utils.update_llm_args_with_extra_dict({}, _args(tmp, spec))
    module.LLM(**args)
    want = SPEC["class_decoding_type"][SPEC["from_dict_types"][DECODING_TYPES[mode]]]
    assert type(args["speculative_config"]).decoding_type == want


@pytest.mark.parametrize("mode", sorted(DECODING_TYPES))
def test_the_raw_dict_the_model_passed_before_is_refused_as_the_llm_api_refuses_it(trtllm, mode):
    """decoding_type is a class variable, no field: the dict matches no member of the union."""
    module, _, _, tmp = trtllm
    spec = {
        **model_yaml(_recipe(mode))["speculative_config"],
        "speculative_model_dir": str(tmp / "draft"),
    }
    with pytest.raises(ValueError, match="decoding_type\n  Extra inputs are not permitted"):
        module.LLM(**_args(tmp, spec))


def test_a_class_tag_is_no_from_dict_key(trtllm):
    """Draft_Target is draft-target's class tag (and main's discriminator); 1.x's from_dict knows DraftTarget."""
    _, args, _, _ = trtllm
    assert "Draft_Target" not in SPEC["from_dict_types"]
    with pytest.raises(ValueError, match="Invalid decoding type: Draft_Target"):
        args.DecodingBaseConfig.from_dict({"decoding_type": "Draft_Target", "max_draft_len": 3})


def test_a_field_the_config_does_not_declare_is_refused(trtllm):
    _, args, _, _ = trtllm
    assert "eagle_choices" in SPEC["eagle_fields"]
    args.DecodingBaseConfig.from_dict(
        {"decoding_type": "Eagle", "max_draft_len": 3, "eagle_choices": [[0]]}
    )
    with pytest.raises(ValueError, match="eagle_choices\n  Extra inputs are not permitted"):
        args.DecodingBaseConfig.from_dict(
            {"decoding_type": "DraftTarget", "max_draft_len": 3, "eagle_choices": [[0]]}
        )


def test_a_decoding_type_the_pytorch_backend_does_not_run_is_refused(trtllm):
    module, args, _, tmp = trtllm
    assert SPEC["not_pytorch"] == ["Medusa"]
    medusa = args.DecodingBaseConfig.from_dict(
        {"decoding_type": "Medusa", "max_draft_len": 3, "speculative_model_dir": str(tmp / "draft")}
    )
    with pytest.raises(
        ValueError, match="Speculation type Medusa does not support backend pytorch"
    ):
        module.LLM(**_args(tmp, medusa))


def test_eagle_without_its_draft_model_is_refused(trtllm):
    module, args, _, tmp = trtllm
    eagle = args.DecodingBaseConfig.from_dict({"decoding_type": "Eagle", "max_draft_len": 3})
    with pytest.raises(ValueError, match="Draft model must be provided for EAGLE"):
        module.LLM(**_args(tmp, eagle))


def test_an_image_newer_than_the_table_gets_mains_discriminator_tags():
    """A TensorRT-LLM beyond the image table (image.ships) is read as main: speculative_config is validated by the
    union discriminated on decoding_type, whose draft-target tag is Draft_Target."""
    assert {
        k: SPEC["at_main"]["decoding_type"][k] for k in DISCRIMINATED_TYPES
    } == DISCRIMINATED_TYPES
    newer = {
        "triton_image": "nvcr.io/nvidia/tritonserver:26.10-trtllm-python-py3",
        "trtllm_version": "1.3.0",
        "ships": {"tensorrt_llm": "1.3.0"},
    }
    assert (
        model_yaml(_recipe("draft_target", **newer))["speculative_config"]["decoding_type"]
        == "Draft_Target"
    )
    assert (
        model_yaml(_recipe("draft_target"))["speculative_config"]["decoding_type"] == "DraftTarget"
    )
