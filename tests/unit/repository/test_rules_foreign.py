"""Triton's load rules on repositories tritonbuild did not build (ours=False): judged as Triton would, with the
structures upstream publishes (tests/contracts/facts/triton_repositories.json), and our build policies as notes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.contracts import repositories
from tests.contracts.facts import load
from tritonbuild.repository.rules import check_model_dir


def _rows(d: Path, **kw) -> dict[str, tuple[bool, str]]:
    return {f.check: (f.ok, f.detail) for f in check_model_dir(d, **kw)}


def _failed(d: Path, **kw) -> dict[str, str]:
    return {check: detail for check, (ok, detail) in _rows(d, **kw).items() if not ok}


def test_a_python_model_without_config_is_autocompleted(tmp_path):
    """python_backend's auto_complete example has no config.pbtxt: Triton finds the backend from 1/model.py and
    the model's auto_complete_config fills the rest (the rule refused it: 'config.pbtxt is missing')."""
    d = repositories.write_batch_auto_complete(tmp_path)
    assert _failed(d, ours=False) == {}
    assert (
        "no config.pbtxt: Triton autocompletes it (backend python"
        in _rows(d, ours=False)["config.parse"][1]
    )
    assert _failed(d) == {
        "config.parse": "config.pbtxt is missing"
    }  # tritonbuild always writes one


def test_a_model_without_config_and_without_a_known_model_file_is_refused(tmp_path):
    d = tmp_path / "m"
    (d / "1").mkdir(parents=True)
    (d / "1" / "weights.bin").write_bytes(b"")
    assert "Could not determine backend for model 'm'" in _failed(d, ours=False)["config.parse"]


def test_a_tensorflow_model_without_config_is_autocompleted_from_its_file(tmp_path):
    d = tmp_path / "tf"
    (d / "1" / "model.savedmodel").mkdir(parents=True)
    assert "backend tensorflow" in _rows(d, ours=False)["config.parse"][1]


def test_the_vllm_sample_is_not_refused_for_decoupled(tmp_path):
    """vllm_backend's sample config names only the backend and KIND_MODEL: the backend's auto_complete_config sets
    decoupled: true (the rule refused it: 'needs model_transaction_policy.decoupled: true')."""
    d = repositories.write_vllm_model(tmp_path)
    assert _failed(d, ours=False) == {}


def test_a_vllm_config_that_writes_decoupled_false_is_refused(tmp_path):
    """set_model_transaction_policy refuses to change a decoupled value the config already holds."""
    rule = load("triton_repositories")["set_model_transaction_policy"]["rule"]
    assert "trying to change decoupled property" in rule
    d = repositories.write_vllm_model(tmp_path, model_transaction_policy={})
    assert "needs model_transaction_policy.decoupled: true" in _failed(d, ours=False)["vllm"]


def test_vllm_kind_gpu_is_refused_only_with_parallelism(tmp_path):
    one = repositories.write_vllm_model(
        tmp_path / "a", instance_group=[{"kind": "KIND_GPU", "count": 1}]
    )
    assert _failed(one, ours=False) == {}
    two = repositories.write_vllm_model(
        tmp_path / "b", instance_group=[{"kind": "KIND_GPU", "count": 1}]
    )
    (two / "1" / "model.json").write_text('{"model": "m", "tensor_parallel_size": 2}')
    assert (
        "refuses KIND_GPU with tensor x pipeline parallelism 2" in _failed(two, ours=False)["vllm"]
    )


def test_an_unknown_backend_model_file_row_says_not_checked(tmp_path):
    """No plug-in knows the openvino backend: its model-file row said '? present in every version' (passed
    without looking); it says what was not checked, and why."""
    d = tmp_path / "ov"
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_text('backend: "openvino"\ninstance_group { kind: KIND_GPU }\n')
    ok, detail = _rows(d, ours=False)["model_file"]
    assert ok and detail.startswith("not checked: tritonbuild has no rules for backend openvino")
    assert "present" not in detail


def test_a_tensorflow_model_file_under_the_wrong_name_is_refused(tmp_path):
    """Triton's core names the TensorFlow platforms' file (model.graphdef); one under another name was accepted."""
    facts = load("triton_repositories")["core_default_model_files"]["files"]
    d = repositories.write_inception_graphdef(tmp_path)
    assert _failed(d, ours=False) == {}
    (d / "1" / facts["tensorflow_graphdef"]).rename(d / "1" / "inception.graphdef")
    assert _failed(d, ours=False) == {
        "model_file": "1/model.graphdef is missing (Triton's core names it for platform tensorflow_graphdef; the "
        "backend loads that file)"
    }


def test_the_densenet_quickstart_model_passes_the_static_rules(tmp_path):
    pytest.importorskip("onnx")
    d = repositories.write_densenet_onnx(tmp_path)
    assert _failed(d, ours=False, model_files=True) == {}


def test_relocatable_engine_paths_are_a_policy_of_our_own_repositories(tmp_path):
    """A filled tensorrtllm_backend template names its engine by an absolute path (as upstream's docs fill it):
    Triton reads it as written. Refused in a repository tritonbuild built, a note in any other."""
    d = tmp_path / "tensorrt_llm"
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_text(
        'backend: "tensorrtllm"\nmax_batch_size: 4\nmodel_transaction_policy { '
        'decoupled: true }\nparameters { key: "gpt_model_path" value { string_value: '
        '"/engines/llama/1-gpu" } }\n'
    )
    assert "the repository is not relocatable" in _failed(d)["model_file"]
    ok, detail = _rows(d, ours=False)["model_file"]
    assert ok and "not checked: gpt_model_path '/engines/llama/1-gpu'" in detail
    assert "applied only to repositories it built" in detail


TOKENIZER = Path(__file__).resolve().parents[3] / "recipes" / "examples" / "tiny-llama"


def _group(tmp_path: Path, tag: str, **overrides) -> Path:
    local = {"tokenizer_dir": str(TOKENIZER)}
    return repositories.write_trtllm_group(
        tmp_path, tag, preprocessing=local, postprocessing=local, **overrides
    )


@pytest.mark.parametrize("tag", ["r24.10", "r25.04"])
def test_a_filled_tensorrtllm_group_passes_triton_s_rules(tmp_path, tag):
    """tensorrtllm_backend's five models at r24.10 and r25.04, filled as fill_template.py fills them from the
    README: no row fails (the r24.10 tensorrt_llm config was refused for three parameters that backend never
    reads), the absolute engine path is a note."""
    root = _group(tmp_path, tag)
    rows = {
        (d.name, check): row
        for d in sorted(root.iterdir())
        for check, row in _rows(d, ours=False, model_files=True).items()
    }
    assert {key: detail for key, (ok, detail) in rows.items() if not ok} == {}
    engine = repositories.release(tag)["readme_fill"]["models"]["tensorrt_llm"]["substitutions"][
        "engine_dir"
    ]
    assert f"not checked: gpt_model_path '{engine}'" in rows[("tensorrt_llm", "model_file")][1]
    note = rows[("tensorrt_llm", "tensorrtllm.parameters")][1]
    assert ("the r24.10 backend never reads them" in note) == (tag == "r24.10")


def test_the_guided_decoding_parameters_depend_on_the_release_and_fail_in_our_own_repositories(
    tmp_path,
):
    """What r24.10's backend reads unguarded is gpt_model_type alone; r25.04's adds the three (recorded facts):
    in a repository tritonbuild built for its image the three stay required."""
    facts = {tag: repositories.release(tag)["unguarded"] for tag in ("r24.10", "r25.04")}
    assert set(facts["r25.04"]) - set(facts["r24.10"]) == {
        "tokenizer_dir",
        "xgrammar_tokenizer_info_path",
        "guided_decoding_backend",
    }
    d = _group(tmp_path, "r24.10") / "tensorrt_llm"
    assert "Cannot find parameter with name: tokenizer_dir" in _failed(d)["tensorrtllm.parameters"]


def test_a_config_lacking_one_of_the_guided_decoding_three_is_refused_for_every_release(tmp_path):
    """r25.04's template writes the three together; one removed by hand fails every release that reads them."""
    from tritonbuild.triton.config import parse, render

    d = _group(tmp_path, "r25.04") / "tensorrt_llm"
    mc = parse((d / "config.pbtxt").read_bytes())
    del mc.parameters["xgrammar_tokenizer_info_path"]
    (d / "config.pbtxt").write_bytes(render(mc))
    assert _failed(d, ours=False) == {
        "tensorrtllm.parameters": (
            "parameter xgrammar_tokenizer_info_path is missing: the tensorrtllm backend fails the load with 'Cannot "
            'find parameter with name: xgrammar_tokenizer_info_path\' (set it, "" = off)'
        )
    }


def test_a_placeholder_fill_template_leaves_in_an_integer_field_is_a_parse_error(tmp_path):
    """r24.10's fill_template.py fills max_queue_size alone by default (r25.04's also max_queue_delay_microseconds):
    a command line without max_queue_delay_microseconds leaves '${max_queue_delay_microseconds}' in r24.10's
    tensorrt_llm config, which Triton cannot parse."""
    assert (
        "max_queue_delay_microseconds"
        not in repositories.release("r24.10")["fill_defaults"]["values"]
    )
    subs = {"max_queue_delay_microseconds": None}
    (tmp_path / "r24.10").mkdir()
    (tmp_path / "r25.04").mkdir()
    old = repositories.write_trtllm_group(tmp_path / "r24.10", "r24.10", tensorrt_llm=subs)
    new = repositories.write_trtllm_group(tmp_path / "r25.04", "r25.04", tensorrt_llm=subs)
    detail = _failed(old / "tensorrt_llm", ours=False)["config.parse"]
    assert (
        "max_queue_delay_microseconds" in detail and "not a valid inference.ModelConfig" in detail
    )
    assert "config.parse" not in _failed(new / "tensorrt_llm", ours=False)


@pytest.mark.parametrize(
    "groups, refused",
    [
        ("instance_group { kind: KIND_GPU }", "is KIND_GPU"),
        ("instance_group { kind: KIND_AUTO gpus: [0] }", "KIND_AUTO with gpus [0]"),
        ("instance_group { kind: KIND_CPU count: 2 }", None),
        ("", None),  # no group: the backend's preferred group is KIND_CPU
    ],
)
def test_an_openvino_model_with_a_gpu_instance_group_is_refused_as_the_backend_refuses_it(
    tmp_path, groups, refused
):
    """Triton's core accepts it; the OpenVINO backend refuses every instance kind but CPU when it creates the
    instance (facts/kubernetes.json openvino_instance_kind): verify passed it (a false accept)."""
    facts = load("kubernetes")["openvino_instance_kind"]
    d = tmp_path / "ov"
    (d / "1").mkdir(parents=True)
    (d / "1" / "model.xml").write_text("<net/>")
    (d / "config.pbtxt").write_text(
        f'name: "ov"\n{groups}\n'
    )  # the backend found from model.xml, as Triton does
    rows = _rows(d, ours=False)
    ok, detail = rows["instance_kind"]
    if refused is None:
        assert ok and facts["accepted_kinds"] == ["KIND_CPU"]
    else:
        assert not ok and refused in detail and facts["message"] in detail
