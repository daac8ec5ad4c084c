"""adopt of a filled tensorrtllm_backend group (backends/tensorrtllm/adopt.py): the group, filled from the recorded
templates as fill_template.py fills them, becomes one LLM recipe assembled around the prebuilt engine its
tensorrt_llm model serves; built with --engine, the serving settings the original set are the ones served; what
the recipe cannot hold, an engine or tokenizer not here, is refused by name and leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.contracts import repositories
from tests.unit.backends.adopting import adopt_refused
from tritonbuild.triton.config import parse

ROOT = Path(__file__).resolve().parents[3]
CHECKPOINT = str(ROOT / "recipes" / "examples" / "tiny-llama")
ENGINE = str(ROOT / "tests" / "fixtures" / "engines" / "tiny-llama-w4a16")
# what a user fills beyond the README's line (fill_template.py key:value pairs)
SETTINGS = {
    "kv_cache_free_gpu_mem_fraction": "0.5",
    "enable_kv_cache_reuse": "true",
    "batch_scheduler_policy": "max_utilization",
    "exclude_input_in_output": "true",
    "max_tokens_in_paged_kv_cache": "4096",
    "iter_stats_max_iterations": "50",
}


def _group(
    root: Path, tag: str = "r25.04", engine: str = ENGINE, tokenizer: str = CHECKPOINT, **llm
) -> Path:
    root.mkdir()
    return repositories.write_trtllm_group(
        root,
        tag,
        tensorrt_llm={"engine_dir": engine, "tokenizer_dir": tokenizer, **SETTINGS, **llm},
        preprocessing={"tokenizer_dir": tokenizer, "preprocessing_instance_count": "2"},
        postprocessing={"tokenizer_dir": tokenizer, "postprocessing_instance_count": "3"},
    )


@pytest.mark.parametrize("tag", ["r24.10", "r25.04"])
def test_a_filled_group_becomes_an_llm_recipe_around_its_engine(cli, tmp_path, tag):
    repo = _group(tmp_path / "models", tag)
    r = cli("adopt", repo, "-o", tmp_path / "recipes", "--no-record", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert sorted(p.name for p in (tmp_path / "recipes").iterdir()) == ["ensemble", "ensemble.yaml"]
    spec = yaml.safe_load((tmp_path / "recipes" / "ensemble.yaml").read_text())
    assert spec["backend"] == "tensorrtllm" and spec["runtime"] == "engine"
    assert (
        spec["quantization"] == "int4_weight_only" and spec["engine"]["max_batch_size"] == 8
    )  # engine config
    assert spec["serving"]["instances"] == {"preprocessing": 2, "postprocessing": 3, "bls": 1}
    assert spec["serving"]["bls"] is True
    out = tmp_path / "OUT"
    original, built = _build_adopted(cli, tmp_path, repo, out)
    for key in SETTINGS:  # served as the original set them
        assert built.parameters[key].string_value == original.parameters[key].string_value, key
    assert (
        built.parameters["gpt_model_type"].string_value
        == original.parameters["gpt_model_type"].string_value
    )
    assert built.model_transaction_policy.decoupled == original.model_transaction_policy.decoupled
    pre = parse((out / "ensemble_preprocessing" / "config.pbtxt").read_bytes())
    assert [g.count for g in pre.instance_group] == [2]


def test_a_parameter_the_recipe_cannot_hold_is_refused_by_name(cli, tmp_path):
    err = adopt_refused(
        cli,
        tmp_path,
        _group(tmp_path / "models", decoding_mode="top_k_top_p", participant_ids="1,2"),
    )
    assert (
        "tensorrt_llm: parameters ['decoding_mode', 'participant_ids'] have no recipe key yet"
        in err
    )


def test_the_readme_fills_engine_path_not_here_is_refused_naming_it(cli, tmp_path):
    engine = repositories.release("r25.04")["readme_fill"]["models"]["tensorrt_llm"][
        "substitutions"
    ]["engine_dir"]
    err = adopt_refused(cli, tmp_path, _group(tmp_path / "models", engine=engine))
    assert f"gpt_model_path {engine!r} is not an engine directory here" in err


def test_a_tokenizer_dir_without_the_checkpoint_is_refused(cli, tmp_path):
    tokenizer = repositories.release("r25.04")["readme_fill"]["models"]["preprocessing"][
        "substitutions"
    ]
    err = adopt_refused(
        cli, tmp_path, _group(tmp_path / "models", tokenizer=tokenizer["tokenizer_dir"])
    )
    assert (
        f"tokenizer_dir {tokenizer['tokenizer_dir']!r} is not a Hugging Face checkpoint directory here"
        in err
    )


def test_a_parameter_fill_template_left_unset_takes_the_backends_default(cli, tmp_path):
    """exclude_input_in_output left as ${exclude_input_in_output} is unset: the C++ backend's default (false),
    not the recipe's own (true)."""
    repo = _group(tmp_path / "models", exclude_input_in_output=None)
    assert "${exclude_input_in_output}" in (repo / "tensorrt_llm" / "config.pbtxt").read_text()
    assert cli("adopt", repo, "-o", tmp_path / "recipes", "--no-record").exit_code == 0
    spec = yaml.safe_load((tmp_path / "recipes" / "ensemble.yaml").read_text())
    assert spec["serving"]["exclude_input_in_output"] is False


def _speculative_engine(tmp_path: Path, mode: int, draft: int, seq: int, tokens: int) -> str:
    """The fixture engine as trtllm-build writes it with --speculative_decoding_mode (the IntFlag's int) and
    --max_draft_len: build_config.max_seq_len already holds max_draft_len, max_num_tokens as raised
    (facts/trtllm_speculative.json draft_limits)."""
    import json
    import shutil

    d = tmp_path / "engine"
    shutil.copytree(ENGINE, d)
    config = json.loads((d / "config.json").read_text())
    config["build_config"] |= {
        "speculative_decoding_mode": mode,
        "max_draft_len": draft,
        "max_seq_len": seq,
        "max_num_tokens": tokens,
    }
    (d / "config.json").write_text(json.dumps(config))
    return str(d)


LOOKAHEAD = {
    "decoding_mode": "lookahead",
    "lookahead_window_size": "3",
    "lookahead_ngram_size": "3",
    "lookahead_verification_set_size": "2",
}  # max_draft_len 1 + (3 - 1 + 2) × (3 - 1) = 9


def test_a_lookahead_engine_becomes_a_recipe_whose_engine_check_passes(cli, tmp_path):
    """max_seq_len 512 recorded = 503 + max_draft_len 9; max_num_tokens 80 = max_batch_size 8 × (9 + 1), as
    trtllm-build raised it: the recipe's built limits are the engine's, so build --engine accepts the engine."""
    from tritonbuild.backends.tensorrtllm.speculative import SPECULATIVE_DECODING_MODES

    mode = {v: k for k, v in SPECULATIVE_DECODING_MODES.items()}["lookahead_decoding"]
    engine = _speculative_engine(tmp_path, mode, 9, 512, 80)
    repo = _group(tmp_path / "models", engine=engine, **LOOKAHEAD)
    r = cli("adopt", repo, "-o", tmp_path / "recipes", "--no-record")
    assert r.exit_code == 0, r.stdout + r.stderr
    spec = yaml.safe_load((tmp_path / "recipes" / "ensemble.yaml").read_text())
    assert spec["speculative"] == {
        "mode": "lookahead",
        "window_size": 3,
        "ngram_size": 3,
        "verification_set_size": 2,
    }
    assert (spec["engine"]["max_seq_len"], spec["engine"]["max_num_tokens"]) == (503, 80)
    out = tmp_path / "OUT"
    original, built = _build_adopted(cli, tmp_path, repo, out)
    for key in LOOKAHEAD:  # the lookahead decoding the original ran, served again
        assert built.parameters[key].string_value == original.parameters[key].string_value, key


def test_a_lookahead_engine_whose_window_differs_from_its_draft_length_is_refused(cli, tmp_path):
    engine = _speculative_engine(tmp_path, 8, 7, 512, 80)
    err = adopt_refused(cli, tmp_path, _group(tmp_path / "models", engine=engine, **LOOKAHEAD))
    assert (
        "lookahead (W, N, G) = (3, 3, 2) needs max_draft_len 9" in err and "was built with 7" in err
    )


def test_a_lookahead_engine_without_its_window_parameters_is_refused(cli, tmp_path):
    """Without (W, N, G) the recipe would build an engine without lookahead: refused, not a recipe that differs."""
    engine = _speculative_engine(tmp_path, 8, 9, 512, 80)
    err = adopt_refused(cli, tmp_path, _group(tmp_path / "models", engine=engine))
    assert (
        "built with lookahead_decoding (max_draft_len 9) but parameters ['lookahead_window_size'"
        in err
    )


@pytest.mark.parametrize(
    ("mode", "name"), [(32, "eagle"), (2, "draft_tokens_external"), (4, "medusa")]
)
def test_an_engine_speculative_mode_the_recipe_cannot_express_is_refused_naming_it(
    cli, tmp_path, mode, name
):
    engine = _speculative_engine(tmp_path, mode, 4, 512, 64)
    err = adopt_refused(cli, tmp_path, _group(tmp_path / "models", engine=engine))
    assert (
        f"the engine was built with build_config.speculative_decoding_mode {name} (max_draft_len 4)"
        in err
    )
    assert "config.json" in err
    if (
        name == "medusa"
    ):  # the heads the recipe would build from are nowhere in the engine or the group
        assert "needs heads_checkpoint" in err and "max_draft_len: 4" in err


def _build_adopted(cli, tmp_path, repo, out):
    """Build the adopted recipes around the original engine: (the original tensorrt_llm config, the built one)."""
    r = cli(
        "build",
        tmp_path / "recipes",
        "-o",
        out,
        "--engine",
        f"ensemble={tmp_path / 'recipes' / 'ensemble' / 'engine'}",
    )
    assert r.exit_code == 0, r.stdout + r.stderr
    return (
        parse((repo / "tensorrt_llm" / "config.pbtxt").read_bytes()),
        parse((out / "ensemble_tensorrt_llm" / "config.pbtxt").read_bytes()),
    )
