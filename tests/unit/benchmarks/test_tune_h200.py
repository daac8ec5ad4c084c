"""benchmarks/tune/: h200.sh fails loudly (a failed goldens recording stops it; a failed tune step is reported and
becomes its exit code), and summarize.py says whether repeated runs picked the same config."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "tune" / "h200.sh"
sys.path.insert(0, str(ROOT / "benchmarks" / "tune"))

from summarize import summarize  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                                reason="needs bash and coreutils timeout")

# the script's python3, standing in for the H200's: what tritonbuild exits with, per sub-command
PYTHON3 = """#!/usr/bin/env bash
case "$*" in
  *" verify "*) echo '{"passed": false}'; exit "${VERIFY_RC:-0}" ;;
  *" tune "*) echo "tune ran"; exit "${TUNE_RC:-0}" ;;
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
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(out),
           "H200_WORK": str(tmp_path / "work"), **env}
    (tmp_path / "work").mkdir(exist_ok=True)
    return subprocess.run(["bash", str(SCRIPT), *steps], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)


def test_a_failed_goldens_recording_stops_the_script(tmp_path):
    result = _run(tmp_path, "quick-fixed", VERIFY_RC="6")
    assert result.returncode == 1, result.stderr
    assert "FAILED: verify --record of gpu-mlp-fixed" in result.stderr
    assert "tune ran" not in result.stdout  # nothing tuned against missing goldens
    assert (tmp_path / "out" / "record-gpu-mlp-fixed.json").read_text().strip() == '{"passed": false}'


def test_a_failed_tune_step_is_reported_and_is_the_exit_code(tmp_path):
    (tmp_path / "work" / "goldens").mkdir(parents=True)
    (tmp_path / "work" / "goldens" / "gpu-mlp-fixed.npz").write_bytes(b"")
    result = _run(tmp_path, "quick-fixed@1", "quick-fixed@2", TUNE_RC="6")
    assert result.returncode == 6
    assert result.stderr.count("tune exited 6") == 2  # the second repeat still ran
    assert (tmp_path / "out" / "quick-fixed@2.tgz").is_file()
    assert _run(tmp_path, "quick-fixed@3").returncode == 0


def _report(path: str, winner: str, top: tuple[float, float, float]) -> dict:
    ratio, low, high = top
    return {"_path": path, "winner": {"label": winner}, "top_load": "c64", "loads": ["c1", "c64"],
            "comparison": {"c64": {"ratio": ratio, "low": low, "high": high},
                           "c1": {"ratio": 1.2, "low": 1.1, "high": 1.3}}}


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


@pytest.mark.parametrize("recipe", sorted((ROOT / "benchmarks" / "tune").glob("*.yaml")), ids=lambda p: p.name)
def test_the_benchmark_recipes_load(recipe):
    from tritonbuild.backends import REGISTRY
    from tritonbuild.recipe.load import load_recipe

    loaded = load_recipe(recipe, REGISTRY.recipe_kinds())
    assert loaded.recipe.tune is not None and loaded.recipe.verify.batch_invariance == "require"
    if loaded.recipe.batch_buckets:
        assert loaded.recipe.tune.determinism == "invariant" and loaded.recipe.tune.buckets
