from __future__ import annotations

import pytest

from tests.conftest import PY_RECIPE
from tritonbuild.backends import REGISTRY
from tritonbuild.errors import MultipleErrors, RecipeError, TritonBuildError
from tritonbuild.recipe.load import load_recipe, load_recipes


def _errors(path) -> list[RecipeError]:
    with pytest.raises(TritonBuildError) as info:
        load_recipe(path, REGISTRY.recipe_kinds())
    e = info.value
    return e.errors if isinstance(e, MultipleErrors) else [e]


def test_valid_recipe_loads(py_recipe):
    lr = load_recipe(py_recipe, REGISTRY.recipe_kinds())
    assert (lr.recipe.name, lr.recipe.version, lr.recipe.backend) == ("doubler", 1, "python")
    assert len(lr.digest) == 64


def test_unknown_key_names_file_line_and_key(write):
    p = write("r.yaml", PY_RECIPE + "max_batch_szie: 8\n")
    (e,) = _errors(p)
    assert e.where == f"{p}:9"
    assert "max_batch_szie: unknown key" in e.message
    assert "spelling" in e.hint


def test_nested_unknown_key_points_at_its_line(write):
    p = write("r.yaml", PY_RECIPE.replace("repeats: 2", "repeats: 2, golden: x"))
    (e,) = _errors(p)
    assert e.message.startswith("verify.golden: unknown key")
    assert e.where.endswith(":8")


def test_wrong_type(write):
    (e,) = _errors(write("r.yaml", PY_RECIPE.replace("max_batch_size: 4", "max_batch_size: four")))
    assert e.message.startswith("max_batch_size:") and "'four'" in e.message
    assert e.where.endswith(":5")


def test_missing_required_field(write):
    (e,) = _errors(write("r.yaml", PY_RECIPE.replace("version: 1\n", "")))
    assert e.message == "version: required key is missing"


def test_yaml_syntax_error_has_line(write):
    (e,) = _errors(write("r.yaml", "name: a\nversion: [1\nbackend: python\n"))
    assert "YAML syntax error" in e.message and e.where.split(":")[-1] in ("3", "4")


def test_duplicate_yaml_key(write):
    (e,) = _errors(write("r.yaml", PY_RECIPE + "version: 2\n"))
    assert e.message == "duplicate key 'version' (first at line 2)"
    assert e.where.endswith(":9")


@pytest.mark.parametrize(
    "name", ["a/b", "..", "has space", "quo'te", "new\\nline", ".hidden", "-dash", ""]
)
def test_bad_model_names(write, name):
    text = PY_RECIPE.replace("name: doubler", f'name: "{name}"')
    (e,) = _errors(write("r.yaml", text))
    assert e.message.startswith("name:"), e.message


@pytest.mark.parametrize("version", ["0", "-1"])
def test_version_must_be_positive(write, version):
    (e,) = _errors(write("r.yaml", PY_RECIPE.replace("version: 1", f"version: {version}")))
    assert e.message.startswith("version:") and "greater than or equal to 1" in e.message


def test_preferred_batch_size_over_max(write):
    p = write("r.yaml", PY_RECIPE + "batching: {preferred_batch_sizes: [2, 8]}\n")
    (e,) = _errors(p)
    assert (
        e.message
        == "batching.preferred_batch_sizes[1]: preferred batch size 8 exceeds max_batch_size 4"
    )
    assert "max_batch_size" in e.hint


def test_dynamic_batching_without_batch_dimension_is_accepted(write):
    """Triton loads dynamic_batching with max_batch_size 0 (a queue with priorities and timeouts, no batching):
    refusing it was stricter than Triton (the corpus' ok-dynamic-batching-nonbatching case)."""
    text = PY_RECIPE.replace("max_batch_size: 4", "max_batch_size: 0")
    loaded = load_recipe(
        write("r.yaml", text + "batching: {max_queue_delay_us: 100}\n"), REGISTRY.recipe_kinds()
    )
    assert loaded.recipe.max_batch_size == 0 and loaded.recipe.batching is not None


def test_preferred_batch_size_without_batch_dimension(write):
    text = PY_RECIPE.replace("max_batch_size: 4", "max_batch_size: 0")
    (e,) = _errors(write("r.yaml", text + "batching: {preferred_batch_sizes: [2]}\n"))
    assert (
        e.message
        == "batching.preferred_batch_sizes[0]: preferred batch size 2 exceeds max_batch_size 0"
    )


def test_gpu_instances_on_cpu_target(write):
    (e,) = _errors(write("r.yaml", PY_RECIPE + "instances: [{kind: gpu, count: 1}]\n"))
    assert e.message.startswith("instances[0].kind: kind gpu but the recipe's target is cpu")
    assert e.where.endswith(":9")


def test_cpu_instances_cannot_list_gpus(write):
    (e,) = _errors(write("r.yaml", PY_RECIPE + "instances: [{kind: cpu, gpus: [0]}]\n"))
    assert e.message.startswith("instances[0].gpus: kind cpu cannot list gpus")


def test_python_needs_io(write):
    text = PY_RECIPE.replace("outputs: [{name: Y, dtype: fp32, dims: [3]}]\n", "")
    (e,) = _errors(write("r.yaml", text))
    assert e.message.startswith("outputs: python models must declare 'outputs'")


def test_all_problems_reported_at_once(write):
    errs = _errors(write("r.yaml", PY_RECIPE + "foo: 1\nbar: 2\n"))
    assert [e.message for e in errs] == ["foo: unknown key", "bar: unknown key"]


def test_same_name_and_version_twice(write, py_recipe):
    other = write("sub/again.yaml", PY_RECIPE)
    with pytest.raises(RecipeError) as info:
        load_recipes([py_recipe, other], REGISTRY.recipe_kinds())
    assert "model 'doubler' version 1 is also defined in" in info.value.message


def test_top_level_must_be_mapping(write):
    (e,) = _errors(write("r.yaml", "- a\n- b\n"))
    assert "must be a YAML mapping" in e.message


def test_preserve_ordering_with_delay_timeout_is_refused(write):
    """Triton refuses it at load (core r24.10 ValidateModelConfig); it used to pass validate, build and verify."""
    p = write(
        "r.yaml",
        PY_RECIPE + "batching: {preserve_ordering: true, default_queue_policy: "
        "{timeout_action: delay, default_timeout_us: 1000}}\n",
    )
    (e,) = _errors(p)
    assert e.message.startswith(
        "batching.default_queue_policy.timeout_action: timeout_action delay with preserve_ordering"
    )
    assert "reject" in e.hint and e.exit_code == 3


def test_preserve_ordering_with_delay_and_no_timeout_is_valid(write):
    """A DELAY action that can never trigger (no timeout) is what Triton accepts."""
    p = write(
        "r.yaml",
        PY_RECIPE + "batching: {preserve_ordering: true, default_queue_policy: "
        "{timeout_action: delay}}\n",
    )
    load_recipe(p, REGISTRY.recipe_kinds())


def test_schema_and_semantic_errors_come_in_one_run(write):
    """issue 31.4 (3): a recipe with an unknown key and a rule broken elsewhere reported the unknown key, and only
    after the user fixed it, the rule: both now, each with file:line and key, exit 3."""
    text = PY_RECIPE.replace(
        "max_batch_size: 4", "max_batch_size: 4\nbatching: {preferred_batch_sizes: [8]}"
    )
    p = write("r.yaml", text + "max_batch_szie: 8\n")
    errs = _errors(p)
    assert [(e.message.split(":")[0], e.where) for e in errs] == [
        ("max_batch_szie", f"{p}:10"),
        ("batching.preferred_batch_sizes[0]", f"{p}:6"),
    ], [str(e) for e in errs]
    assert all(e.exit_code == 3 for e in errs)


def test_a_bad_value_and_a_backend_rule_come_in_one_run(write):
    """A wrong value type (the key is dropped for the second pass) beside a backend's check_recipe problem."""
    text = PY_RECIPE.replace("outputs: [{name: Y, dtype: fp32, dims: [3]}]\n", "").replace(
        "repeats: 2", "repeats: two"
    )
    errs = _errors(write("r.yaml", text))
    assert [e.message.split(":")[0] for e in errs] == ["verify.repeats", "outputs"], [
        str(e) for e in errs
    ]


def test_a_semantic_rule_on_a_key_with_a_schema_error_is_not_guessed(write):
    """The second pass leaves out rules about what the first pass refused (no rule judges a dropped key)."""
    text = PY_RECIPE.replace(
        "max_batch_size: 4", "max_batch_size: four\nbatching: {preferred_batch_sizes: [8]}"
    )
    errs = _errors(write("r.yaml", text))
    assert [e.message.split(":")[0] for e in errs] == ["max_batch_size"], [str(e) for e in errs]


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("float32", "fp32"),
        ("float16", "fp16"),
        ("half", "fp16"),
        ("int", "int32"),
        ("TYPE_FP32", "fp32"),
        ("fp23", "fp32"),
        ("string", "bytes"),
        ("double", "fp64"),
    ],
)
def test_a_dtype_by_another_name_gets_did_you_mean(write, written, meant):
    """issue 31.4 (4): float32 gave 'Input should be ...' with no suggestion of Triton's name."""
    (e,) = _errors(
        write("r.yaml", PY_RECIPE.replace("{name: X, dtype: fp32", f"{{name: X, dtype: {written}"))
    )
    assert e.message.startswith("inputs[0].dtype:") and e.where.endswith(":6")
    assert f"did you mean '{meant}'" in e.hint, e.hint


def test_an_enum_value_gets_did_you_mean(write):
    (e,) = _errors(write("r.yaml", PY_RECIPE + "target: gpus\n"))
    assert "did you mean 'gpu'" in e.hint, e.hint
