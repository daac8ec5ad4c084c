"""The CI templates, Dockerfile.triton and its healthcheck: validated by the tools of
their own ecosystems, and every tritonbuild command they run exists with those options."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

from tests.conftest import ROOT

TEMPLATES = {"github-actions.yml": "vendor.github-workflows", "gitlab-ci.yml": "vendor.gitlab-ci"}
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = shutil.which(name) or (str(BIN / name) if (BIN / name).exists() else None)
    if path is None:
        pytest.skip(f"{name} is not installed")
    return path


@pytest.mark.parametrize("template, schema", sorted(TEMPLATES.items()))
def test_template_validates_against_its_ci_schema(template, schema):
    path = ROOT / "ci" / "templates" / template
    yaml.safe_load(path.read_text())
    r = subprocess.run(
        [_tool("check-jsonschema"), "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def _invocations(text: str) -> list[list[str]]:
    out = []
    for line in text.splitlines():
        if line.strip().startswith("#"):
            continue
        for m in re.finditer(r"(?<!install )(?<!install \")tritonbuild ([^|;&>\n]*)", line):
            tokens = [t.strip("'\"[]{},") for t in m.group(1).split()]
            tokens = [t for t in tokens if t]
            if tokens and re.match(r"[a-z]", tokens[0]):
                out.append(tokens)
    return out


def _options(cmd: click.Command) -> set[str]:
    return {
        opt for p in cmd.params for opt in getattr(p, "opts", []) + getattr(p, "secondary_opts", [])
    }


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_every_tritonbuild_command_in_the_templates_exists(template):
    from tritonbuild.cli import main

    calls = _invocations((ROOT / "ci" / "templates" / template).read_text())
    assert len(calls) >= 5
    for argv in calls:
        cmd: click.Command = main
        words = list(argv)
        while isinstance(cmd, click.Group):
            name = words.pop(0)
            assert name in cmd.commands, f"{template}: tritonbuild {name} does not exist"
            cmd = cmd.commands[name]
        for word in words:
            if word.startswith("-"):
                assert word.split("=")[0] in _options(cmd), (
                    f"{template}: {cmd.name} has no option {word}"
                )


def test_dockerfile_passes_hadolint():
    r = subprocess.run(
        [_tool("hadolint"), str(ROOT / "Dockerfile.triton")], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr
    text = (ROOT / "Dockerfile.triton").read_text()
    assert "ARG TRITON_FLAVOR=trtllm-python-py3" in text and "ARG TRITON_VERSION" in text
    assert (
        "healthcheck.py" in text.split("HEALTHCHECK", 1)[1]
    )  # a real inference, not just /health/ready


@pytest.mark.triton
@pytest.mark.slow
def test_healthcheck_infers_and_catches_a_wrong_answer(cli, tmp_path, in_root):
    from tritonbuild.server.embedded import EmbeddedServer

    out = tmp_path / "OUT"
    assert cli("build", "recipes/examples/risk-scorer.yaml", "-o", out).exit_code == 0
    script = [
        sys.executable,
        str(ROOT / "ci" / "docker" / "healthcheck.py"),
        "--repository",
        str(out),
    ]
    with EmbeddedServer(out) as server:
        server.load("risk-scorer")
        ok = subprocess.run(
            [*script, "--url", f"http://{server.http_url}"], capture_output=True, text=True
        )
        assert ok.returncode == 0, ok.stderr
        import numpy as np

        from tritonbuild.core.npz import read_npz, write_npz

        golden = out / "risk-scorer" / "golden-v1.npz"
        arrays = read_npz(golden)
        arrays["output.0.PROBS"] = arrays["output.0.PROBS"] + np.float32(1e-7)
        write_npz(golden, arrays)
        bad = subprocess.run(
            [*script, "--url", f"http://{server.http_url}"], capture_output=True, text=True
        )
        assert bad.returncode == 1 and "output PROBS differs from its golden" in bad.stderr
    down = subprocess.run(
        [*script, "--url", "http://127.0.0.1:9", "--timeout", "2"], capture_output=True, text=True
    )
    assert down.returncode == 1 and "not ready" in down.stderr


@pytest.mark.parametrize(
    "template, run_id",
    [("github-actions.yml", "${{ github.run_id }}"), ("gitlab-ci.yml", "$CI_PIPELINE_ID")],
)
def test_verify_and_publish_share_a_per_pipeline_report_key(template, run_id):
    """The default pipeline signs its report with a key of this run (a secret + the run's id), visible to the
    job that verifies and the job that publishes; publish refuses to run with the secret unset."""
    doc = yaml.safe_load((ROOT / "ci" / "templates" / template).read_text())
    env = doc["env"] if "env" in doc else doc["variables"]  # workflow-wide: every job sees it
    key = env["TRITONBUILD_REPORT_KEY"]
    assert "TRITONBUILD_REPORT_SECRET" in key and key.endswith(f":{run_id}")
    publish = doc["jobs"]["publish"]["steps"] if "jobs" in doc else doc["publish"]["script"]
    text = yaml.safe_dump(publish)
    assert text.index("test -n") < text.index("tritonbuild publish")
