"""benchmarks/tune/: h200.sh fails loudly (a failed goldens recording stops it; a failed tune step is reported and
becomes its exit code), names its archives as the device tool returns them, runs only what is left and what fits
the call's time; summarize.py says whether repeated runs picked the same config; soak.py soaks the config a
report chose; plot_runs.py plots the paired decisions of reports."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "tune" / "h200.sh"
sys.path.insert(0, str(ROOT / "benchmarks" / "tune"))

from plot_runs import finalists  # noqa: E402
from plot_runs import main as plot_main  # noqa: E402
from soak import chosen_of  # noqa: E402
from summarize import summarize  # noqa: E402

pytestmark = pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("timeout") is None,
    reason="needs bash and coreutils timeout",
)

# the script's python3, standing in for the H200's: what tritonbuild exits with, per sub-command
PYTHON3 = """#!/usr/bin/env bash
case "$*" in
  *" verify "*) echo '{"passed": false}'; exit "${VERIFY_RC:-0}" ;;
  *" tune "*) echo "tune ran: $*"; exit "${TUNE_RC:-0}" ;;
  *) exit 0 ;;
esac
"""


def _run(tmp_path: Path, *steps: str, **env) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").write_text(PYTHON3)
    (bin_dir / "python3").chmod(0o755)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "OUT": str(out),
        "H200_WORK": str(tmp_path / "work"),
        **env,
    }
    (tmp_path / "work").mkdir(exist_ok=True)
    return subprocess.run(
        ["bash", str(SCRIPT), *steps], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_a_failed_goldens_recording_stops_the_script(tmp_path):
    result = _run(tmp_path, "quick-fixed", VERIFY_RC="6")
    assert result.returncode == 1, result.stderr
    assert "FAILED: verify --record of gpu-mlp-fixed" in result.stderr
    assert "tune ran" not in result.stdout  # nothing tuned against missing goldens
    assert (
        tmp_path / "out" / "record-gpu-mlp-fixed.json"
    ).read_text().strip() == '{"passed": false}'


def test_a_failed_tune_step_is_reported_and_is_the_exit_code(tmp_path):
    (tmp_path / "work" / "goldens").mkdir(parents=True)
    (tmp_path / "work" / "goldens" / "gpu-mlp-fixed.npz").write_bytes(b"")
    result = _run(tmp_path, "quick-fixed@1", "quick-fixed@2", TUNE_RC="6")
    assert result.returncode == 6
    assert result.stderr.count("tune exited 6") == 2  # the second repeat still ran
    # the device tool returns only files named in letters, digits, '.', '_' and '-'
    assert sorted(p.name for p in (tmp_path / "out").glob("*.tgz")) == [
        "quick-fixed-run1.tgz",
        "quick-fixed-run2.tgz",
    ]
    assert _run(tmp_path, "quick-fixed@3").returncode == 0


def test_a_repeat_s_soak_is_named_as_the_device_tool_returns_it(tmp_path):
    """soak-buckets@1 (the soak of quick-buckets@1's pick): its JSON comes back as soak-buckets-run1.json (the
    tool left soak-buckets@1.json out: '@' is not in the names it returns)."""
    (tmp_path / "work" / "quick-buckets@1").mkdir(parents=True)
    (tmp_path / "work" / "quick-buckets@1" / "tune-report.json").write_text("{}")
    result = _run(tmp_path, "soak-buckets@1")
    assert result.returncode == 0, result.stderr
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["soak-buckets-run1.json"]


def test_a_step_already_done_on_the_machine_is_not_run_again(tmp_path):
    (tmp_path / "work" / "goldens").mkdir(parents=True)
    (tmp_path / "work" / "goldens" / "gpu-mlp-fixed.npz").write_bytes(b"")
    (tmp_path / "work" / "quick-fixed@1").mkdir()
    (tmp_path / "work" / "quick-fixed@1" / "tune-report.json").write_text("{}")
    result = _run(tmp_path, "quick-fixed@1", "quick-fixed@2")
    assert result.returncode == 0, result.stderr
    assert "quick-fixed@1: already done on this machine" in result.stdout
    assert result.stdout.count("tune ran") == 1


def test_a_step_that_does_not_fit_the_time_left_is_skipped_for_the_next_call(tmp_path):
    (tmp_path / "work" / "goldens").mkdir(parents=True)
    (tmp_path / "work" / "goldens" / "gpu-mlp-fixed.npz").write_bytes(b"")
    result = _run(
        tmp_path, "quick-fixed@1", "quick-fixed@2", H200_BUDGET_S="200", H200_STEP_S="300"
    )
    assert result.returncode == 75
    assert "tune ran" not in result.stdout
    assert (
        "SKIPPED (not run in this call, give them to the next): quick-fixed@1 quick-fixed@2"
        in result.stderr
    )
    assert _run(tmp_path, "quick-fixed@1", H200_BUDGET_S="200", H200_STEP_S="100").returncode == 0


def test_the_paired_bucket_step_cuts_the_grid_and_the_rule_so_both_finalists_are_measured(tmp_path):
    work = tmp_path / "work"
    (work / "goldens").mkdir(parents=True)
    (work / "goldens" / "gpu-mlp-buckets.npz").write_bytes(b"")
    shutil.copy(ROOT / "benchmarks" / "tune" / "gpu-mlp-buckets.yaml", work)
    result = _run(tmp_path, "quick-buckets-paired")
    assert result.returncode == 0, result.stderr
    assert "--recipe gpu-mlp-buckets-paired.yaml --min-vs-default 0.3" in result.stdout
    text = (work / "gpu-mlp-buckets-paired.yaml").read_text()
    for line in (
        "instance_counts: [1, 4]",
        "max_queue_delay_us: [0]",
        "batch_sizes: [128]",
        "buckets: [128]",
    ):
        assert f"  {line}\n" in text


def _report(path: str, winner: str, top: tuple[float, float, float]) -> dict:
    ratio, low, high = top
    return {
        "_path": path,
        "winner": {"label": winner},
        "top_load": "c64",
        "loads": ["c1", "c64"],
        "comparison": {
            "c64": {"ratio": ratio, "low": low, "high": high},
            "c1": {"ratio": 1.2, "low": 1.1, "high": 1.3},
        },
    }


def test_summarize_says_same_overlapping_or_different():
    same = [_report(f"quick-fixed@{i}", "1x128", (11.0, 10.0, 12.0)) for i in range(3)]
    lines, agree = summarize(same)
    assert agree and lines[-1] == "same pick in all 3 runs: 1x128"
    near = [*same[:2], _report("quick-fixed@3", "2x128", (11.8, 11.5, 13.0))]
    lines, agree = summarize(near)
    assert agree and "overlap" in lines[-1]
    apart = [*same[:2], _report("quick-fixed@3", "4x128", (15.0, 14.0, 16.0))]
    lines, agree = summarize(apart)
    assert not agree and lines[-1].startswith("DIFFERENT picks")


@pytest.mark.parametrize(
    "recipe", sorted((ROOT / "benchmarks" / "tune").glob("*.yaml")), ids=lambda p: p.name
)
def test_the_benchmark_recipes_load(recipe):
    from tritonbuild.backends import REGISTRY
    from tritonbuild.recipe.load import load_recipe

    loaded = load_recipe(recipe, REGISTRY.recipe_kinds())
    assert loaded.recipe.tune is not None and loaded.recipe.verify.batch_invariance == "require"
    if loaded.recipe.batch_buckets:
        assert loaded.recipe.tune.determinism == "invariant" and loaded.recipe.tune.buckets


def _winner_report() -> dict:
    from tritonbuild.tune.report import candidate_dict
    from tritonbuild.tune.space import Candidate

    chosen = Candidate(
        instances=4,
        kind="gpu",
        gpus=[0],
        batching=True,
        max_batch_size=128,
        coords=(2, 3, 0, 0),
        buckets=(128,),
    )
    decisions = [
        {"load": load, "outcome": "passed", "interval": {"ratio": r, "low": low, "high": high}}
        for load, r, low, high in (("c1", 1.2, 1.1, 1.3), ("c64", 9.0, 8.9, 9.1))
    ]
    return {
        "loads": ["c1", "c64"],
        "min_vs_default": 1.0,
        "winner": candidate_dict(chosen, []),
        "default_is_best": False,
        "candidates": [
            {"label": chosen.label, "decisions": decisions},
            {"label": "default", "decisions": []},
        ],
    }, chosen


def test_soak_serves_the_config_the_report_chose_or_its_best_clean_one(tmp_path):
    report, chosen = _winner_report()
    path = tmp_path / "tune-report.json"
    path.write_text(json.dumps(report))
    assert chosen_of(path) == (chosen.model_copy(update={"coords": None}), "the config tune chose")
    # tune kept the default: the batching config with the best top-load reading whose answers never differed
    fast_but_variant = {
        **report["winner"],
        "label": "fast",
        "max_batch_size": 64,
        "loads": {"c64": {"throughput": 900.0}},
        "answers": {"compared": 10, "differing": 1},
    }
    clean = {
        **report["winner"],
        "max_batch_size": 32,
        "loads": {"c64": {"throughput": 500.0}},
        "answers": {"compared": 10, "differing": 0},
    }
    slow = {**clean, "max_batch_size": 16, "loads": {"c64": {"throughput": 100.0}}}
    report.update(
        winner={"label": "default", "is_default": True},
        top_load="c64",
        verdict="the default is best",
        candidates=[fast_but_variant, slow, clean],
    )
    path.write_text(json.dumps(report))
    candidate, which = chosen_of(path)
    assert candidate.max_batch_size == 32 and which.startswith(
        "not chosen by tune (the default is best)"
    )
    report["candidates"] = [fast_but_variant]
    path.write_text(json.dumps(report))
    with pytest.raises(SystemExit, match="nothing to soak"):
        chosen_of(path)


def test_plot_runs_plots_every_finalist_of_every_report(tmp_path):
    report, chosen = _winner_report()
    assert finalists(report) == [
        {
            "label": chosen.label,
            "chosen": True,
            "loads": {"c1": (1.2, 1.1, 1.3, "passed"), "c64": (9.0, 8.9, 9.1, "passed")},
        }
    ]
    paths = []
    for run in (1, 2):
        (tmp_path / f"quick@{run}").mkdir()
        paths.append(tmp_path / f"quick@{run}" / "tune-report.json")
        paths[-1].write_text(json.dumps(report))
    pytest.importorskip("matplotlib")
    out = tmp_path / "plot.png"
    assert plot_main([*map(str, paths), "--out", str(out), "--target", "c64=3"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report["candidates"] = [{"label": "default", "decisions": []}]
    paths[0].write_text(json.dumps(report))
    assert plot_main([str(paths[0]), "--out", str(out)]) == 1  # nothing paired: nothing to plot
