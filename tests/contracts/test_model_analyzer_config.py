"""The Model Analyzer profile config `export model-analyzer` writes (builder/tune/analyzer.py), checked against
Model Analyzer's schema as recorded (facts/model_analyzer.json: model_config_parameters are ModelConfig's own
fields, which the real protobuf here names) and, where triton-model-analyzer is installed, parsed by its own
config loader."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
import yaml

from tests.conftest import EXAMPLES
from tests.contracts.facts import load
from tritonbuild import api
from tritonbuild.errors import UsageError
from tritonbuild.recipe.models import Tune
from tritonbuild.triton.schema import model_config_pb2
from tritonbuild.tune.analyzer import profile_config

FACTS = load("model_analyzer")
RECIPE = EXAMPLES / "feature-normalizer.yaml"


def _recipe(**tune):
    loaded = api.validate([RECIPE])[0].recipe
    return loaded.model_copy(update={"tune": Tune(**tune) if tune else None})


def _check_fields(value, descriptor, where: str) -> None:
    """Every key is a field of the ModelConfig message it sits in; a repeated message field (instance_group) is
    swept as a list of lists, a scalar as a list of values."""
    for key, sweep in value.items():
        field = descriptor.fields_by_name.get(key)
        assert field is not None, f"{where}.{key} is not a ModelConfig field"
        repeated = (
            field.is_repeated
            if hasattr(field, "is_repeated")
            else field.label == field.LABEL_REPEATED
        )
        if field.type == field.TYPE_MESSAGE and repeated:
            assert all(isinstance(option, list) for option in sweep), (
                f"{where}.{key}: sweep as a list of lists"
            )
            for option in sweep:
                for item in option:
                    _check_fields(item, field.message_type, f"{where}.{key}")
        elif field.type == field.TYPE_MESSAGE:
            _check_fields(sweep, field.message_type, f"{where}.{key}")
        elif repeated:
            assert all(isinstance(option, list) for option in sweep), (
                f"{where}.{key}: sweep as a list of lists"
            )
        elif field.type == field.TYPE_ENUM:
            names = {v.name for v in field.enum_type.values}
            assert ({sweep} if isinstance(sweep, str) else set(sweep)) <= names, (
                f"{where}.{key}: {sweep}"
            )


def test_the_tune_space_is_a_manual_sweep_of_modelconfig_fields():
    recipe = _recipe(
        batch_sizes=[4, 8],
        max_queue_delay_us=[0, 100, 500],
        instance_counts=[1, 3],
        preferred_batch_sizes=[True],
        concurrency=[1, 8, 32],
        sla_p99_ms=20.5,
    )
    document, notes = profile_config([recipe], "/models", input_data={recipe.name: "data.json"})
    assert document["run_config_search_disable"] is True
    spec = document["profile_models"][recipe.name]
    assert set(spec) <= set(FACTS["profile_model_keys"])
    assert set(spec["parameters"]) <= set(FACTS["parameters"]["keys"])
    _check_fields(
        spec["model_config_parameters"],
        model_config_pb2().ModelConfig.DESCRIPTOR,
        "model_config_parameters",
    )
    mcp = spec["model_config_parameters"]
    assert mcp["max_batch_size"] == [4, 8]
    assert mcp["dynamic_batching"] == {"max_queue_delay_microseconds": [0, 100, 500]}
    assert mcp["instance_group"] == [
        [{"kind": "KIND_CPU", "count": 1}],
        [{"kind": "KIND_CPU", "count": 3}],
    ]
    assert spec["parameters"] == {"concurrency": [1, 8, 32], "batch_sizes": [1]}
    assert spec["constraints"] == {
        "perf_latency_p99": {"max": 20}
    }  # Model Analyzer's max is an int
    assert spec["perf_analyzer_flags"] == {"input-data": "data.json"}
    said = " ".join(notes[recipe.name])
    assert "preferred_batch_size" in said and "without a dynamic batcher" in said and "20" in said


def test_one_max_batch_size_keeps_its_preferred_size_and_a_non_batching_model_sweeps_instances_only():
    document, _ = profile_config([_recipe(batch_sizes=[8], preferred_batch_sizes=[True])], "/m")
    batcher = document["profile_models"]["feature-normalizer"]["model_config_parameters"][
        "dynamic_batching"
    ]
    assert batcher["preferred_batch_size"] == [[8]]
    flat = _recipe().model_copy(update={"max_batch_size": 0, "batching": None})
    mcp = profile_config([flat], "/m")[0]["profile_models"]["feature-normalizer"][
        "model_config_parameters"
    ]
    assert (
        set(mcp) == {"instance_group"} and len(mcp["instance_group"]) == 3
    )  # tune's default counts 1, 2, 4


def test_the_cli_writes_the_yaml_and_refuses_an_input_data_it_cannot_place(tmp_path, cli):
    out = tmp_path / "ma.yaml"
    r = cli("export", "model-analyzer", RECIPE, "-m", tmp_path, "-o", out, "--input-data", "d.json")
    assert r.exit_code == 0, r.output
    assert yaml.safe_load(out.read_text())["profile_models"]["feature-normalizer"][
        "perf_analyzer_flags"
    ] == {"input-data": "d.json"}
    out.unlink()
    r = cli(
        "export",
        "model-analyzer",
        RECIPE,
        "-m",
        tmp_path,
        "-o",
        out,
        "--input-data",
        "other=d.json",
    )
    assert r.exit_code == UsageError.exit_code and "other" in r.stderr and not out.exists()


def _model_analyzer_loads(path, perf_analyzer: str):
    """Model Analyzer's own `profile -f PATH` parsing (its CLI and ConfigCommandProfile)."""
    from model_analyzer.cli.cli import CLI
    from model_analyzer.config.input.config_command_profile import ConfigCommandProfile

    argv = sys.argv
    sys.argv = ["model-analyzer", "profile", "-f", str(path), "--perf-analyzer-path", perf_analyzer]
    try:
        config = ConfigCommandProfile()
        cli = CLI()
        cli.add_subcommand(cmd="profile", help="", config=config)
        cli.parse()
    finally:
        sys.argv = argv
    return config


@pytest.mark.skipif(
    importlib.util.find_spec("model_analyzer") is None, reason="triton-model-analyzer not installed"
)
def test_model_analyzers_own_loader_reads_the_export(tmp_path, cli):
    from model_analyzer.model_analyzer_exceptions import TritonModelAnalyzerException

    out = tmp_path / "ma.yaml"
    assert cli("export", "model-analyzer", RECIPE, "-m", tmp_path, "-o", out).exit_code == 0
    # NOTE: it insists that perf_analyzer exists; any executable stands in, nothing is run
    config = _model_analyzer_loads(out, sys.executable)
    assert config.run_config_search_disable is True
    (spec,) = config.profile_models
    assert spec.model_name() == "feature-normalizer"
    mcp = spec.model_config_parameters()
    assert mcp["max_batch_size"] == [4, 8] and mcp["dynamic_batching"] == [
        {"max_queue_delay_microseconds": [0, 500]}
    ]
    assert [group[0]["count"] for group in mcp["instance_group"]] == [[1], [2], [4]]
    assert spec.parameters()["concurrency"] == [1, 64]
    every = (
        tmp_path / "every.yaml"
    )  # every example that has a serving space (GPU kinds, other backends)
    assert cli("export", "model-analyzer", EXAMPLES, "-m", tmp_path, "-o", every).exit_code == 0
    names = {
        spec.model_name() for spec in _model_analyzer_loads(every, sys.executable).profile_models
    }
    assert names == set(yaml.safe_load(every.read_text())["profile_models"]) and len(names) >= 4
    # the same loader refuses a key that is not ModelConfig's (so the check above can fail)
    bad = tmp_path / "bad.yaml"
    bad.write_text(out.read_text().replace("max_queue_delay_microseconds", "max_queue_delay_us"))
    with pytest.raises((TritonModelAnalyzerException, SystemExit)):
        _model_analyzer_loads(bad, sys.executable)


def test_pipelines_and_llm_groups_are_left_out_with_a_note_and_alone_refused(tmp_path, cli):
    out = tmp_path / "ma.yaml"
    r = cli("export", "model-analyzer", EXAMPLES / "risk-pipeline.yaml", "-m", tmp_path, "-o", out)
    assert (
        r.exit_code == UsageError.exit_code
        and "risk-pipeline" in r.stderr
        and "Traceback" not in r.stderr
    )
    assert not out.exists()
    r = cli("export", "model-analyzer", EXAMPLES, "-m", tmp_path, "-o", out, "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert {"risk-pipeline", "risk-pipeline-bls", "tiny-llama"}.isdisjoint(summary["models"])
    assert {"feature-normalizer", "risk-scorer"} <= set(summary["models"])
    assert "left out" in summary["notes"]["risk-pipeline"][0]
    assert set(yaml.safe_load(out.read_text())["profile_models"]) == set(summary["models"])
