"""tritonbuild adopt: python_backend's add_sub-style hand-written repository becomes recipes that build the same
config, with goldens recorded from the model; then build → verify (bit for bit) → publish → a new version →
rollback, as for a repository we built."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.contracts import repositories
from tests.contracts.facts import load
from tritonbuild.triton.config import parse

pytestmark = pytest.mark.triton

SAME = ("backend", "max_batch_size", "input", "output", "instance_group")


def test_adopt_build_verify_publish_rollback(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    repo = tmp_path / "models"
    repo.mkdir()
    original = parse((repositories.write_add_sub(repo) / "config.pbtxt").read_bytes())
    r = cli("adopt", repo, "-o", tmp_path / "recipes", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["goldens"] == {"add_sub": True}
    recipe = tmp_path / "recipes" / "add_sub.yaml"
    assert (tmp_path / "recipes" / "goldens" / "add_sub.npz").is_file()

    out = tmp_path / "OUT"
    assert cli("build", tmp_path / "recipes", "-o", out).exit_code == 0
    built = parse((out / "add_sub" / "config.pbtxt").read_bytes())
    for (
        field
    ) in SAME:  # the same config semantics (a KIND_CPU group of one instance is count 1 either way)
        got, want = getattr(built, field), getattr(original, field)
        if field == "instance_group":
            got, want = (
                [(g.kind, g.count or 1) for g in got],
                [(g.kind, g.count or 1) for g in want],
            )
        assert got == want, field
    r = cli("verify", out, "--json")
    assert r.exit_code == 0, r.stdout
    (model,) = json.loads(r.stdout)["models"]
    assert model["passed"] and model["compared"] > 0 and not model["mismatches"]

    target = f"file://{tmp_path / 'pub'}"
    assert cli("publish", out, target).exit_code == 0
    spec = yaml.safe_load(recipe.read_text())
    recipe.write_text(yaml.safe_dump({**spec, "version": 2}, sort_keys=False))
    assert cli("build", tmp_path / "recipes", "-o", out).exit_code == 0
    assert cli("verify", out).exit_code == 0  # the goldens adopt recorded hold for version 2
    assert cli("publish", out, target).exit_code == 0
    assert "versions: 2" in (tmp_path / "pub" / "add_sub" / "config.pbtxt").read_text()
    r = cli("rollback", target, "add_sub", "--to", "1")
    assert r.exit_code == 0, r.stderr
    assert "versions: 1" in (tmp_path / "pub" / "add_sub" / "config.pbtxt").read_text()


def test_adopt_an_ensemble_over_python_models_build_verify(cli, tmp_path, monkeypatch):
    """An ensemble over add_sub (called twice: sum and difference, then again) becomes an ensemble recipe; its
    goldens are recorded through the ensemble in the embedded server ((a+b)+(a-b), (a+b)-(a-b)); built,
    the ensemble_scheduling is the original's, and verify passes bit for bit, the ensemble included."""
    import numpy as np

    from tritonbuild.core.npz import read_npz
    from tritonbuild.verify.goldens import from_npz_arrays

    monkeypatch.chdir(tmp_path)
    repo = tmp_path / "models"
    repo.mkdir()
    repositories.write_add_sub(repo)
    original = parse((repositories.write_add_sub_ensemble(repo) / "config.pbtxt").read_bytes())
    r = cli("adopt", repo, "-o", tmp_path / "recipes", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["goldens"] == {"add_sub": True, "add_sub_twice": True}
    assert "tritonserver" in result["recorded_by"]["add_sub_twice"]
    inputs, outputs = from_npz_arrays(
        read_npz(tmp_path / "recipes" / "goldens" / "add_sub_twice.npz")
    )
    for sample_in, sample_out in zip(
        inputs, outputs, strict=True
    ):  # add_sub twice, in float32 as the steps run
        total, difference = (
            sample_in["INPUT0"] + sample_in["INPUT1"],
            sample_in["INPUT0"] - sample_in["INPUT1"],
        )
        assert np.array_equal(sample_out["OUTPUT0"], total + difference)
        assert np.array_equal(sample_out["OUTPUT1"], total - difference)
    assert inputs
    out = tmp_path / "OUT"
    assert cli("build", tmp_path / "recipes", "-o", out).exit_code == 0
    built = parse((out / "add_sub_twice" / "config.pbtxt").read_bytes())
    assert (
        built.ensemble_scheduling == original.ensemble_scheduling and built.input == original.input
    )
    r = cli("verify", out, "--json")
    assert r.exit_code == 0, r.stdout
    rows = {row["name"]: row for row in json.loads(r.stdout)["models"]}
    assert rows["add_sub_twice"]["passed"] and rows["add_sub_twice"]["compared"] > 0


def test_adopt_names_what_it_cannot_adopt(cli, tmp_path):
    repo = tmp_path / "models"
    repo.mkdir()
    repositories.write_inception_graphdef(repo)
    r = cli("adopt", repo, "-o", tmp_path / "recipes")
    assert r.exit_code == 2 and "backend tensorflow_graphdef is not adopted yet" in r.stderr
    assert "tritonbuild publish DIR URL" in r.stderr


def _same_semantics(original, built) -> None:
    """The config Triton serves: the platform names its backend (onnxruntime_onnx → onnxruntime ...); a group
    without count has the count Triton gives it (SetDefaultInstanceCount: 2 for an onnxruntime KIND_CPU group)."""
    for field in ("max_batch_size", "input", "output", "optimization"):
        assert getattr(built, field) == getattr(original, field), field
    cpu = load("triton_instance_groups")["count"]["default_cpu"].get(built.backend, 1)
    kind_cpu = (
        type(built)
        .DESCRIPTOR.fields_by_name["instance_group"]
        .message_type.enum_values_by_name["KIND_CPU"]
    )
    assert [(g.kind, g.count) for g in built.instance_group] == [
        (g.kind, g.count or (cpu if g.kind == kind_cpu.number else 1))
        for g in original.instance_group
    ]
    assert built.platform == original.platform or built.backend == original.backend


@pytest.mark.parametrize("writer", ["write_add_sub_onnx", "write_add_sub_torchscript"])
def test_adopt_an_onnx_or_torchscript_model_build_verify(cli, tmp_path, monkeypatch, writer):
    """ONNX and TorchScript models become recipes (source.path = model.onnx / model.pt, the config's tensors,
    instances, accelerators); goldens are recorded where the model runs here: in-process (onnxruntime, torch),
    since the embedded server has neither backend, and said so; build → verify passes bit for bit."""
    pytest.importorskip("onnx" if "onnx" in writer else "torch")
    monkeypatch.chdir(tmp_path)
    repo = tmp_path / "models"
    repo.mkdir()
    model_dir = getattr(repositories, writer)(repo)
    original = parse((model_dir / "config.pbtxt").read_bytes())
    r = cli("adopt", repo, "-o", tmp_path / "recipes", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["goldens"] == {model_dir.name: True}
    assert "in-process" in result["recorded_by"][model_dir.name]
    out = tmp_path / "OUT"
    assert cli("build", tmp_path / "recipes", "-o", out).exit_code == 0
    _same_semantics(original, parse((out / model_dir.name / "config.pbtxt").read_bytes()))
    r = cli("verify", out, "--json")
    assert r.exit_code == 0, r.stdout
    (model,) = json.loads(r.stdout)["models"]
    assert model["passed"] and model["compared"] > 0 and model["route"] == "in-process"
    assert any(
        "not loaded in tritonserver: the embedded server has no" in note for note in model["notes"]
    )
    target = f"file://{tmp_path / 'pub'}"  # published and rolled back like a model we built
    assert cli("publish", out, target).exit_code == 0
    recipe = tmp_path / "recipes" / f"{model_dir.name}.yaml"
    recipe.write_text(recipe.read_text().replace("version: 1", "version: 2", 1))
    assert (
        cli("build", tmp_path / "recipes", "-o", out).exit_code == 0
        and cli("verify", out).exit_code == 0
    )
    assert cli("publish", out, target).exit_code == 0
    assert cli("rollback", target, model_dir.name, "--to", "1").exit_code == 0
    assert "versions: 1" in (tmp_path / "pub" / model_dir.name / "config.pbtxt").read_text()


def test_adopt_keeps_onnxruntime_accelerators_and_refuses_what_no_recipe_key_holds(cli, tmp_path):
    pytest.importorskip("onnx")
    repo = tmp_path / "models"
    repo.mkdir()
    accel = {
        "optimization": {
            "execution_accelerators": {"cpu_execution_accelerator": [{"name": "openvino"}]}
        }
    }
    repositories.write_add_sub_onnx(repo, **accel)
    r = cli("adopt", repo, "-o", tmp_path / "recipes", "--no-record")
    assert r.exit_code == 0, r.stderr
    spec = yaml.safe_load((tmp_path / "recipes" / "add_sub_onnx.yaml").read_text())
    assert spec["accelerators"] == {"cpu": [{"name": "openvino"}]} and spec["source"][
        "path"
    ].endswith("model.onnx")
    other = tmp_path / "other"
    other.mkdir()
    repositories.write_densenet_onnx(other)
    r = cli("adopt", other, "-o", tmp_path / "recipes2", "--no-record")
    # the labels file is carried now; format and reshape are refused, each at its config.pbtxt line
    assert r.exit_code == 2 and "config.pbtxt:" in r.stderr and "label_filename" not in r.stderr
    assert "input[0].format" in r.stderr and "output[0].reshape" in r.stderr


TINY_LLAMA = Path(__file__).resolve().parents[2] / "recipes" / "examples" / "tiny-llama"


def test_adopt_a_vllm_model(cli, tmp_path):
    """vllm_backend's sample names a Hub id (nothing downloads here): refused with the command that fetches it.
    Its checkpoint inside the version directory, named under the server's mount as model.json does: a vllm
    recipe with model.json's engine arguments; goldens not recorded here (no GPU/vLLM), said so; built, the
    config and model.json say what the original's did."""
    repo = tmp_path / "models"
    repo.mkdir()
    d = repositories.write_vllm_model(repo)
    r = cli("adopt", repo, "-o", tmp_path / "r1")
    sample = repositories.fact("vllm_model")["model_json"]["model"]
    assert r.exit_code == 2 and f"huggingface-cli download {sample}" in r.stderr
    shutil.copytree(TINY_LLAMA, d / "1" / "model", ignore=shutil.ignore_patterns("*.py"))
    spec = {
        **json.loads((d / "1" / "model.json").read_text()),
        "model": "/models/vllm_model/1/model",
        "max_num_batched_tokens": 1024,
    }  # no typed recipe key: engine_args.extra
    (d / "1" / "model.json").write_text(json.dumps(spec))
    r = cli("adopt", repo, "-o", tmp_path / "recipes", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["goldens"] == {"vllm_model": False}
    assert result["recorded_by"]["vllm_model"].startswith("not recorded: ")
    recipe = yaml.safe_load((tmp_path / "recipes" / "vllm_model.yaml").read_text())
    assert recipe["engine_args"] == {
        **{k: v for k, v in spec.items() if k not in ("model", "max_num_batched_tokens")},
        "extra": {"max_num_batched_tokens": 1024},
    }
    out = tmp_path / "OUT"
    r = cli("build", tmp_path / "recipes", "-o", out)
    assert r.exit_code == 0, r.stderr
    built = json.loads((out / "vllm_model" / "1" / "model.json").read_text())
    assert built["model"] == spec["model"] and all(built[k] == v for k, v in spec.items())
    original, ours = (
        parse((d / "config.pbtxt").read_bytes()),
        parse((out / "vllm_model" / "config.pbtxt").read_bytes()),
    )
    assert ours.backend == original.backend and [
        (g.kind, g.count) for g in ours.instance_group
    ] == [(g.kind, g.count) for g in original.instance_group]


def test_adopt_a_filled_tensorrtllm_group_records_what_runs_here(cli, tmp_path, monkeypatch):
    """A filled r25.04 group around a prebuilt engine: adopt builds it with that engine (the group assembled, its
    models checked by Triton's core in the embedded server) and says the goldens need GPU/TRT-LLM; the next
    command it prints names the engine."""
    from tests.unit.backends.test_tensorrtllm_adopt import _group

    monkeypatch.chdir(tmp_path)
    _group(tmp_path / "models")
    r = cli("adopt", tmp_path / "models", "-o", tmp_path / "recipes", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["recorded_by"]["ensemble"] == "not recorded: needs GPU/TRT-LLM"
    assert result["goldens"]["ensemble_tensorrt_llm"] is False
    recipes = tmp_path / "recipes"
    assert result["recipes"] == [
        {
            "name": "ensemble",
            "version": 1,
            "recipe": str(recipes / "ensemble.yaml"),
            "engine": str(recipes / "ensemble" / "engine"),
        }
    ]
    r = cli("adopt", tmp_path / "models", "-o", tmp_path / "again", "--no-record")
    assert f"--engine ensemble={tmp_path / 'again' / 'ensemble' / 'engine'}" in r.stdout


def test_an_ensemble_step_without_model_version_is_refused_as_triton_refuses_it(cli, tmp_path):
    """model_version left out is the proto's 0, a version Triton never serves: the embedded server refuses the
    ensemble ("required version 0 is not loaded"), and adopt refuses it with the fix instead of a recipe that
    could not load."""
    repo = tmp_path / "models"
    repo.mkdir()
    repositories.write_add_sub(repo)
    config = repositories.write_add_sub_ensemble(repo) / "config.pbtxt"
    config.write_text(config.read_text().replace("model_version: -1\n", ""))
    r = cli("verify", repo)
    assert r.exit_code != 0 and "required version 0 is not loaded" in r.stdout + r.stderr
    r = cli("adopt", repo, "-o", tmp_path / "recipes", "--no-record")
    assert r.exit_code == 2 and "step 0 (add_sub) has no model_version" in r.stderr
    assert "model_version: -1" in r.stderr
