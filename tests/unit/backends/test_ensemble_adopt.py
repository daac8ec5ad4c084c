"""adopt of an ensemble (backends/composition/adopt.py, through the stage repository/adopt.py): the ensemble recipe
reproduces Triton's ensemble_scheduling step for step; a step adopt cannot take, a step model the repository
lacks, or a field the recipe cannot hold refuses the ensemble by name; a refusal leaves nothing behind."""

from __future__ import annotations

import yaml

from tests.contracts import repositories
from tests.unit.backends.adopting import adopt_refused
from tritonbuild.triton.config import parse


def _add_sub_repository(tmp_path):
    """A model repository holding add_sub, the model the ensembles below call."""
    repo = tmp_path / "models"
    repo.mkdir()
    repositories.write_add_sub(repo)
    return repo


def test_an_ensemble_becomes_an_ensemble_recipe_with_its_steps_mappings(cli, tmp_path):
    repo = _add_sub_repository(tmp_path)
    ens = repositories.write_add_sub_ensemble(repo)
    original = parse((ens / "config.pbtxt").read_bytes())
    r = cli("adopt", repo, "-o", tmp_path / "recipes", "--no-record")
    assert r.exit_code == 0, r.stdout + r.stderr
    spec = yaml.safe_load((tmp_path / "recipes" / "add_sub_twice.yaml").read_text())
    assert spec["backend"] == "ensemble" and spec["version"] == 1
    assert [(s["model"], s["version"], s["inputs"], s["outputs"]) for s in spec["steps"]] == [
        (s.model_name, s.model_version, dict(s.input_map), dict(s.output_map))
        for s in original.ensemble_scheduling.step
    ]
    assert [t["name"] for t in spec["inputs"]] == [t.name for t in original.input]
    out = tmp_path / "OUT"
    r = cli("build", tmp_path / "recipes", "-o", out)
    assert r.exit_code == 0, r.stdout + r.stderr
    built = parse((out / "add_sub_twice" / "config.pbtxt").read_bytes())
    for field in ("platform", "max_batch_size", "input", "output", "ensemble_scheduling"):
        assert getattr(built, field) == getattr(original, field), field


def test_an_ensemble_over_a_model_adopt_cannot_take_is_refused_naming_that_step(cli, tmp_path):
    repo = _add_sub_repository(tmp_path)
    graphdef = repositories.write_inception_graphdef(repo)
    repositories.write_add_sub_ensemble(repo, steps=("add_sub", graphdef.name))
    err = adopt_refused(cli, tmp_path, repo)
    assert "add_sub_twice: step 1 calls 'inception_graphdef', which adopt cannot take" in err
    assert "backend tensorflow_graphdef is not adopted yet" in err


def test_an_ensemble_calling_a_model_the_repository_lacks_is_refused(cli, tmp_path):
    repo = _add_sub_repository(tmp_path)
    repositories.write_add_sub_ensemble(repo, steps=("add_sub", "elsewhere"))
    assert "step 1 calls 'elsewhere', which this repository does not hold" in adopt_refused(
        cli, tmp_path, repo
    )


def test_an_ensemble_over_a_refused_ensemble_is_refused_naming_the_step(cli, tmp_path):
    repo = _add_sub_repository(tmp_path)
    repositories.write_add_sub_ensemble(
        repo, name="z_inner", parameters={"k": {"string_value": "v"}}
    )
    repositories.write_add_sub_ensemble(repo, steps=("z_inner", "add_sub"), name="outer")
    err = adopt_refused(cli, tmp_path, repo)
    assert "outer: step 0 calls 'z_inner', which adopt cannot take" in err
    assert "config fields ['parameters'] have no ensemble recipe key yet" in err


def test_ensemble_fields_no_recipe_key_holds_are_refused_by_name(cli, tmp_path):
    repo = _add_sub_repository(tmp_path)
    repositories.write_add_sub_ensemble(repo, version_policy={"all": {}})
    err = adopt_refused(cli, tmp_path, repo)
    config = (repo / "add_sub_twice" / "config.pbtxt").read_text().splitlines()
    line = next(i for i, text in enumerate(config, 1) if text.startswith("version_policy"))
    assert f"config.pbtxt:{line}: version_policy: other than Triton's default, latest 1" in err


def test_an_ensemble_over_an_ensemble_is_adopted_after_the_models_it_calls(cli, tmp_path):
    repo = _add_sub_repository(tmp_path)
    repositories.write_add_sub_ensemble(repo, name="z_inner")
    repositories.write_add_sub_ensemble(repo, steps=("z_inner", "add_sub"), name="outer")
    r = cli("adopt", repo, "-o", tmp_path / "recipes", "--no-record", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert (tmp_path / "recipes" / "outer.yaml").is_file() and (
        tmp_path / "recipes" / "z_inner.yaml"
    ).is_file()
