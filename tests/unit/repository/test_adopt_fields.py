"""adopt keeps what Triton keeps (issue 43): every field of a hand-written config.pbtxt is carried into the recipe
(and back into the built config) or refused naming config.pbtxt:line, the field, why and the fix; label_filename
and its file travel with the model; an absent instance_group stays absent (Triton completes it where it loads:
tests/contracts/facts/triton_instance_groups.json), an unset count is the count Triton gives."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.contracts import repositories
from tests.contracts.facts import load
from tests.unit.backends.adopting import adopt_refused
from tritonbuild.triton.config import enum_name, parse
from tritonbuild.triton.fields import FIELDS

MODEL_PY = repositories.ADD_SUB_MODEL
# every ModelConfig field the serving Triton (r24.10) reads, set in CARRIED or REFUSED below (or the ensemble's)
CARRIED = """name: "add_sub"
backend: "python"
max_batch_size: 8
version_policy { specific { versions: [ 1 ] } }
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] optional: true }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "classes.txt" },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
instance_group [ { kind: KIND_CPU count: 2 }, { kind: KIND_CPU } ]
dynamic_batching { preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 100 preserve_ordering: true }
parameters { key: "k" value: { string_value: "v" } }
default_model_filename: "model.py"
"""
# field → the text that sets it, one line each, appended to CARRIED (tensor and group fields edit a line of it)
REFUSED = {
    "batch_input": 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "n" data_type: TYPE_FP32 } ]',
    "batch_output": 'batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: "OUTPUT1" } ]',
    "cc_model_filenames": 'cc_model_filenames { key: "7.5" value: "model.py" }',
    "metric_tags": 'metric_tags { key: "team" value: "a" }',
    "model_operations": 'model_operations { op_library_filename: "ops.so" }',
    "model_repository_agents": 'model_repository_agents { agents [ { name: "checksum" } ] }',
    "model_transaction_policy": "model_transaction_policy { decoupled: true }",
    "model_warmup": 'model_warmup [ { name: "w" batch_size: 1 } ]',
    "optimization": "optimization { priority: PRIORITY_MAX }",
    "response_cache": "response_cache { enable: true }",
    "runtime": 'runtime: "model.so"',
    "sequence_batching": "sequence_batching { max_sequence_idle_microseconds: 5 }",
}
# field of a tensor or group → (a line of CARRIED, the same with the field added on a line of its own)
TENSOR_REFUSED = {
    "input[0].format": ('"INPUT0" data_type', '"INPUT0"\n    format: FORMAT_NHWC\n    data_type'),
    "input[1].reshape": ("optional: true", "optional: true\n    reshape { shape: [ 2, 2 ] }"),
    "output[1].is_shape_tensor": (
        '"OUTPUT1" data_type',
        '"OUTPUT1"\n    is_shape_tensor: true data_type',
    ),
    "instance_group[1].name": ("{ kind: KIND_CPU }", '{ kind: KIND_CPU\n  name: "spare" }'),
    "instance_group[0].rate_limiter": ("count: 2 }", "count: 2\n  rate_limiter { priority: 2 } }"),
}


def _repo(tmp_path, config: str, labels: bool = True):
    model = tmp_path / "models" / "add_sub"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(MODEL_PY)
    (model / "config.pbtxt").write_text(config)
    if labels:
        (model / "classes.txt").write_text("zero\none\ntwo\nthree\n")
    return tmp_path / "models"


def _adopt_build(cli, tmp_path, repo):
    r = cli("adopt", repo, "-o", tmp_path / "recipes", "--no-record", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    r = cli("build", tmp_path / "recipes", "-o", tmp_path / "OUT")
    assert r.exit_code == 0, r.stderr
    return parse((tmp_path / "OUT" / "add_sub" / "config.pbtxt").read_bytes())


def test_the_test_configs_set_every_field_triton_reads():
    carried = {f.name for f, _ in parse(CARRIED.encode()).ListFields()}
    assert FIELDS["ModelConfig"] - {"platform", "ensemble_scheduling"} <= carried | set(REFUSED)


def test_every_carried_field_comes_back_in_the_built_config(cli, tmp_path):
    original = parse(CARRIED.encode())
    built = _adopt_build(cli, tmp_path, _repo(tmp_path, CARRIED))
    for field, _ in original.ListFields():
        if field.name != "instance_group":
            assert getattr(built, field.name) == getattr(original, field.name), field.name
    # a group without count: the count Triton's SetDefaultInstanceCount gives a python KIND_CPU group
    assert [(enum_name(g, "kind", g.kind), g.count) for g in built.instance_group] == [
        ("KIND_CPU", 2),
        ("KIND_CPU", load("triton_instance_groups")["count"]["default"]),
    ]
    assert (tmp_path / "OUT" / "add_sub" / "classes.txt").read_text().startswith("zero\n")
    manifest = (tmp_path / "OUT" / "tritonbuild-manifest.json").read_text()
    assert '"add_sub/classes.txt"' in manifest  # published and digested with the model


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_every_other_field_is_refused_with_its_line_why_and_fix(cli, tmp_path):
    # sequence_batching and dynamic_batching are one oneof: this config has the former
    config = re.sub(r"dynamic_batching[^\n]*\n", "", CARRIED) + "\n".join(REFUSED.values()) + "\n"
    for old, new in TENSOR_REFUSED.values():
        assert old in config
        config = config.replace(old, new, 1)
    err = adopt_refused(cli, tmp_path, _repo(tmp_path, config))
    for field, text in REFUSED.items():
        assert f"config.pbtxt:{_line_of(config, text)}: {field}: " in err, field
    for field, (_old, new) in TENSOR_REFUSED.items():
        line = _line_of(config, new.split("\n")[1])
        assert f"config.pbtxt:{line}: {field}: " in err, (field, line, err)
    assert "sequence batcher" in err and "warmup:" in err and "tritonbuild publish DIR URL" in err


def test_label_filename_travels_with_the_model(cli, tmp_path):
    config = CARRIED.split("instance_group")[0] + 'backend: "python"\n'
    built = _adopt_build(
        cli, tmp_path, _repo(tmp_path, config.replace('backend: "python"\n', "", 1))
    )
    spec = yaml.safe_load((tmp_path / "recipes" / "add_sub.yaml").read_text())
    assert spec["labels"] == {"OUTPUT0": "add_sub/classes.txt"}
    assert [t.label_filename for t in built.output] == ["classes.txt", ""]
    assert (tmp_path / "OUT" / "add_sub" / "classes.txt").is_file()


def test_a_missing_labels_file_is_refused_at_its_line(cli, tmp_path):
    err = adopt_refused(cli, tmp_path, _repo(tmp_path, CARRIED, labels=False))
    assert f"config.pbtxt:{_line_of(CARRIED, 'label_filename')}" in err
    assert "classes.txt" in err and "fix:" in err


def test_no_instance_group_is_left_to_triton_and_said(cli, tmp_path):
    # no label_filename either: on main this config adopted, to KIND_CPU count 1 without a word
    config = re.sub(r"instance_group \[[^\n]*\n", "", CARRIED).replace(
        ' label_filename: "classes.txt"', ""
    )
    built = _adopt_build(cli, tmp_path, _repo(tmp_path, config))
    assert not built.instance_group  # Triton completes it where it loads, as for the original
    spec = yaml.safe_load((tmp_path / "recipes" / "add_sub.yaml").read_text())
    assert spec["instances"] == []
    r = cli("adopt", tmp_path / "models", "-o", tmp_path / "again", "--no-record")
    assert "note: no instance_group: left to Triton" in r.stdout and "KIND_GPU" in r.stdout


def test_an_onnx_cpu_group_without_count_gets_tritons_two(cli, tmp_path):
    pytest.importorskip("onnx")
    repo = tmp_path / "models"
    repo.mkdir()
    repositories.write_add_sub_onnx(repo)  # the recorded instance_group: KIND_CPU, no count
    r = cli("adopt", repo, "-o", tmp_path / "recipes", "--no-record", "--json")
    assert r.exit_code == 0, r.stderr
    spec = yaml.safe_load((tmp_path / "recipes" / "add_sub_onnx.yaml").read_text())
    want = load("triton_instance_groups")["count"]["default_cpu"]["onnxruntime"]
    assert spec["instances"] == [{"kind": "cpu", "count": want}]


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"instance_group": [{"count": 2, "kind": "KIND_GPU"}]}, "instance_group"),
        ({"instance_group": []}, "instance_group"),
        ({"max_batch_size": 4}, "max_batch_size"),
    ],
)
def test_a_vllm_config_the_vllm_recipe_would_rewrite_is_refused(cli, tmp_path, config, field):
    """The vllm recipe writes one KIND_MODEL group of count 1 and max_batch_size 0: a config saying otherwise
    (Triton's own default included, when instance_group is absent) is refused at its line, not rewritten."""
    repo = tmp_path / "models"
    repositories.write_vllm_model(repo, **config)
    err = adopt_refused(cli, tmp_path, repo)
    shown = f"config.pbtxt: {field} (not set): " if not config[field] else f": {field}: "
    assert shown + "the vllm recipe writes" in err


def test_field_lines_follow_text_format_nesting_comments_and_strings():
    from tritonbuild.triton.config import field_line, field_lines

    text = (
        'name: "m"  # input { not a field\n'
        'parameters { key: "k { [" value: { string_value: "}" } }\n'
        'input [\n  { name: "a" },\n  {\n    name: "b"\n    reshape { shape: [ 1 ] }\n  }\n]\n'
        'output {\n  name: "o"\n}\noutput { name: "p"\n  label_filename: "l" }\n'
    )
    parse(text.encode())  # a valid config
    lines = field_lines(text)
    assert field_line(lines, "input[1].reshape") == 7 and field_line(lines, "input[1]") == 5
    assert (
        field_line(lines, "output[1].label_filename") == 14
        and field_line(lines, "output[0].name") == 11
    )
    assert field_line(lines, "parameters") == 2 and field_line(lines, "input[0].name") == 4
    assert field_line(lines, "sequence_batching") is None
