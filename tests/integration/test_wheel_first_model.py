"""tritonbuild as a user gets it: the wheel and sdist built by the standard build frontend (`python -m build`, the
wheel made from the sdist), the wheel installed (not editable) into a fresh venv by the README's own install line,
then the README's "Your first model" run as written: build, verify, publish, serve, infer."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from tests.conftest import ROOT
from tests.timing import limit
from tritonbuild.server.ports import free_port

pytestmark = [pytest.mark.slow, pytest.mark.triton]


def readme_first_model() -> str:
    readme = (ROOT / "README.md").read_text()
    section = re.search(
        r"\[start:first-model\] -->\n(.*?)<!-- --8<-- \[end:first-model\]", readme, re.S
    ).group(1)
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) >= 3, "the README's first model lost its command blocks"
    return "\n".join(blocks)


def tagged_version() -> str | None:
    """The release tag HEAD sits on (vX.Y.Z), if any."""
    r = subprocess.run(
        ["git", "describe", "--tags", "--exact-match", "--match", "v*"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return r.stdout.strip()[1:] if r.returncode == 0 else None


def build_distributions(out: Path, env: dict) -> tuple[Path, Path]:
    r = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        env=env,
        # the whole test took 72 s (a run of 2026-12-06 beside other jobs, ci/timeline.py)
        timeout=limit(72),
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (wheel,), (sdist,) = list(out.glob("tritonbuild-*.whl")), list(out.glob("tritonbuild-*.tar.gz"))
    return wheel, sdist


def test_the_built_wheel_runs_the_readme_first_model(tmp_path):
    env = {
        **os.environ,
        "PIP_CONSTRAINT": str(ROOT / "ci" / "constraints.txt"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    env.pop("VIRTUAL_ENV", None)
    wheel, sdist = build_distributions(tmp_path / "dist", env)
    version = wheel.name.split("-")[1]
    assert sdist.name == f"tritonbuild-{version}.tar.gz"
    Version(version)  # a PEP 440 version, from the git tags (or the fallback)
    if tagged_version():
        assert version == tagged_version(), "a tagged commit builds the tag's version"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    # the code and the package data the repositories it writes need (the Python models, the upstream release
    # facts core/facts.py reads: images, vLLM versions)
    assert {
        "tritonbuild/__main__.py",
        "tritonbuild/cli/__init__.py",
        "tritonbuild/facts/vllm_engine_args.json",
        "tritonbuild/facts/triton_images.json",
        "tritonbuild/facts/triton_image_pythons.json",
        "tritonbuild/backends/vllm/invariant/plugin.py",
        "tritonbuild/backends/vllm/invariant/w4a16.py",
        # the subprocess entries the build steps run with `python -m`, inside the backends' folders
        "tritonbuild/backends/pytorch/export.py",
        "tritonbuild/backends/tensorrt/build.py",
        "tritonbuild/backends/tensorrtllm/llmapi/build.py",
        "tritonbuild/backends/tensorrtllm/models/llmapi.py",
    } <= names
    assert any(
        name.startswith("tritonbuild/backends/models/") and name.endswith(".py") for name in names
    )

    # python3 on PATH is this run's own interpreter (the embedded server's environment, made by ci/test.sh for
    # this Python minor, is reused through TRITONBUILD_ENVS_DIR); the test venv's bin is not on PATH.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}")
    own_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(
        [str(bin_dir), *(p for p in env["PATH"].split(os.pathsep) if p != own_bin)]
    )
    env["TRITONBUILD_SRC"] = str(wheel)
    port = free_port()
    script = readme_first_model()
    # the ports only: another tritonserver (a parallel test, a user's) may hold 8000-8002 here
    script = script.replace(
        "tritonbuild serve ",
        f"tritonbuild serve --http-port {port} --grpc-port 0 --metrics-port 0 ",
    ).replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    assert script.count(f"127.0.0.1:{port}") >= 3
    user = tmp_path / "user"
    user.mkdir()
    # NOTE: into a file, and the script's own exit awaited: a script that fails before its `kill $!` leaves the
    # server it started in the background holding a pipe open, and reading the pipe to its end waited out the
    # whole time limit (seen: 300+ s) before saying what failed
    log = tmp_path / "script.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=user,
            env=env,
            text=True,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            process.wait(timeout=limit(72))  # the whole test, as above
        finally:
            with contextlib.suppress(ProcessLookupError):  # the script's server, if it is still up
                os.killpg(process.pid, signal.SIGTERM)
    output = log.read_text()
    assert process.returncode == 0, output[-6000:]
    assert "[[3. 5. 7. 9.]]" in output, output[-3000:]
    venv = user / "first-model" / ".venv"
    installed = list(venv.glob("lib/python3*/site-packages/tritonbuild/__init__.py"))
    assert installed, "tritonbuild is not installed as files in the fresh venv"
    assert not list(venv.glob("lib/python3*/site-packages/__editable__*")), "an editable install"
    assert f"tritonbuild-{version}.dist-info" in {p.name for p in installed[0].parents[1].iterdir()}


def test_a_tree_without_git_metadata_builds_the_fallback_version(tmp_path):
    """An unpacked archive of the sources (no .git, no PKG-INFO) still builds, as pyproject's fallback_version."""
    tomllib = pytest.importorskip("tomllib")  # 3.11+

    fallback = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools_scm"][
        "fallback_version"
    ]
    tree = tmp_path / "tree"
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_bytes(source.read_bytes())
    env = {
        **os.environ,
        "PIP_CONSTRAINT": str(ROOT / "ci" / "constraints.txt"),
        "GIT_DIR": str(tmp_path / "none"),
    }
    r = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"), str(tree)],
        capture_output=True,
        text=True,
        env=env,
        timeout=limit(6),  # the whole test: 6 s (the same run)
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert [p.name for p in (tmp_path / "dist").glob("*.whl")] == [
        f"tritonbuild-{fallback}-py3-none-any.whl"
    ]
