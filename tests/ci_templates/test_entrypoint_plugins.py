"""The serving image's entrypoint (ci/docker/entrypoint.sh, the image the Kubernetes snippet's custom-image
variant runs) with several invariant vLLM models: each ships the plugin wheel in its own version directory, and
the image's Python gets one install per distinct wheel. Run with pip itself into a fresh virtual environment (two
paths to the same distribution were pip's ResolutionImpossible, and `set -e` ended the container before
tritonserver); tritonserver is a stand-in that prints its command line."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
import yaml

from tests.conftest import EXAMPLES, ROOT
from tritonbuild import api
from tritonbuild.backends.vllm.invariant import wheel as invariant

pytestmark = pytest.mark.slow
RECIPE = """\
name: {name}
version: 1
backend: vllm
checkpoint: {{path: {ckpt}}}
engine_args: {{dtype: float16, max_num_seqs: 16, enforce_eager: true}}
serving: {{determinism: invariant}}
image: {{triton_image: "nvcr.io/nvidia/tritonserver:26.06-vllm-python-py3"}}
"""


def _two_invariant_models(tmp_path):
    recipes = []
    for name in ("chat", "coder"):
        recipe = tmp_path / f"{name}.yaml"
        recipe.write_text(RECIPE.format(name=name, ckpt=EXAMPLES / "tiny-llama"))
        recipes.append(recipe)
    api.build_repository(recipes, tmp_path / "repo")
    return tmp_path / "repo"


@pytest.fixture(scope="module")
def image_python(tmp_path_factory):
    """A fresh virtual environment with pip: the serving image's Python, as far as installing wheels goes."""
    venv = tmp_path_factory.mktemp("image") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return venv


def _installed(venv) -> list[str]:
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [f"{p['name']}=={p['version']}" for p in json.loads(out) if "invariant" in p["name"]]


def _entrypoint(tmp_path, venv, models, *args, env=None):
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "tritonserver").write_text(
        '#!/bin/sh\necho "tritonserver $* VLLM_BATCH_INVARIANT=$VLLM_BATCH_INVARIANT"\n'
    )
    (fake / "tritonserver").chmod(stat.S_IRWXU)
    return subprocess.run(
        ["bash", str(ROOT / "ci/docker/entrypoint.sh"), *args],
        env={
            **os.environ,
            **(env or {}),
            "PATH": f"{venv / 'bin'}:{fake}:{os.environ['PATH']}",  # pip is the venv's own
            "TRITONBUILD_MODELS": str(models),
        },
        capture_output=True,
        text=True,
    )


def test_two_invariant_models_reach_tritonserver_with_the_plugin_installed_once(
    tmp_path, monkeypatch, image_python
):
    monkeypatch.chdir(tmp_path)
    repo = _two_invariant_models(tmp_path)
    wheels = sorted(repo.glob("*/1/plugins/*.whl"))
    assert len(wheels) == 2 and wheels[0].read_bytes() == wheels[1].read_bytes()
    r = _entrypoint(tmp_path, image_python, repo)
    assert r.returncode == 0, r.stdout + r.stderr  # was 1: pip's ResolutionImpossible
    (served,) = [line for line in r.stdout.splitlines() if line.startswith("tritonserver ")]
    assert f"--model-repository={repo}" in served and served.endswith("VLLM_BATCH_INVARIANT=1")
    assert _installed(image_python) == [f"{invariant.DIST}=={invariant.plugin_version()}"]
    # vLLM finds the plugin through its entry point in the image's Python
    found = subprocess.run(
        [
            str(image_python / "bin" / "python"),
            "-c",
            "from importlib.metadata import entry_points as e;"
            f"print([p.name for p in e(group={invariant.ENTRY_POINT_GROUP!r})])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert invariant.ENTRY_POINT_NAME in found


def _another_build_of_the_plugin(repo, monkeypatch) -> str:
    """chat's version directory ships the plugin as another tritonbuild built it (another version): the
    repository's manifest names that wheel for chat."""
    monkeypatch.setattr(invariant, "plugin_version", lambda: "1.0+g000000000000")
    plugins = repo / "chat" / "1" / "plugins"
    for old in plugins.iterdir():
        old.unlink()
    wheel = invariant.plugin_wheel(plugins)
    manifest = repo / "tritonbuild-manifest.json"
    data = json.loads(manifest.read_text())
    for model in data["models"]:
        if model["name"] == "chat":
            model["llm"]["serving"]["plugins"] = [f"plugins/{wheel.name}"]
    manifest.write_text(json.dumps(data))
    monkeypatch.undo()
    return wheel.name


def test_two_builds_of_the_plugin_are_refused_before_tritonserver_starts(
    tmp_path, monkeypatch, image_python
):
    """One Python holds one version of a distribution: two models verified with two different builds of the
    plugin cannot both be served as verified. Refused, naming both, before anything is installed."""
    monkeypatch.chdir(tmp_path)
    repo = _two_invariant_models(tmp_path)
    other = _another_build_of_the_plugin(repo, monkeypatch)
    before = _installed(image_python)
    r = _entrypoint(tmp_path, image_python, repo)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "tritonserver " not in r.stdout and "Traceback" not in r.stderr
    assert "chat" in r.stderr and "coder" in r.stderr and "1.0+g000000000000" in r.stderr
    assert invariant.plugin_version() in r.stderr and "rebuild" in r.stderr
    assert _installed(image_python) == before
    assert other in r.stderr


def test_the_kubernetes_custom_image_snippet_starts_two_invariant_models(
    cli, tmp_path, monkeypatch, image_python
):
    """deploy-snippets without --target (the image built from Dockerfile.triton, its entrypoint): the pod's env
    and args run the real entrypoint to tritonserver with both models; two builds of the plugin are refused when
    the snippet is written, not in a crash-looping pod."""
    monkeypatch.chdir(tmp_path)
    repo = _two_invariant_models(tmp_path)
    out = tmp_path / "deploy"
    r = cli("deploy-snippets", repo, "-o", out, "--image", "registry.example/llm:1")
    assert r.exit_code == 0, r.stderr
    docs = list(yaml.safe_load_all((out / "tritonserver.yaml").read_text()))
    (deploy,) = [doc for doc in docs if doc["kind"] == "Deployment"]
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    # the entrypoint pip-installs into the image's Python (root's): root, without privileges, and said so
    assert "runAsNonRoot" not in deploy["spec"]["template"]["spec"]["securityContext"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "the pods run as root (chat's plugin wheels are pip-installed" in r.stdout
    env = {item["name"]: item["value"] for item in container.get("env", [])}
    started = _entrypoint(tmp_path, image_python, repo, *container["args"], env=env)
    assert started.returncode == 0, started.stdout + started.stderr
    (served,) = [line for line in started.stdout.splitlines() if line.startswith("tritonserver ")]
    assert "--strict-readiness=false" in served and "--exit-on-error=false" in served
    _another_build_of_the_plugin(repo, monkeypatch)
    refused = cli(
        "deploy-snippets", repo, "-o", tmp_path / "deploy2", "--image", "registry.example/llm:1"
    )
    assert refused.exit_code == 2, refused.output
    assert (
        "chat" in refused.stderr and "coder" in refused.stderr and "Traceback" not in refused.stderr
    )
    assert not (tmp_path / "deploy2").exists()
