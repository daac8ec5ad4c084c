"""The container launcher's command line against NGC's documented usage of the tritonserver image
(tests/contracts/facts/triton_container.json): ports, the repository mount, the image's own tritonserver, GPUs."""

from __future__ import annotations

import shlex

import pytest

from tests.contracts.facts import load
from tritonbuild.server import launcher
from tritonbuild.server.target import ServingTarget


def _documented(which: str) -> dict:
    """The documented command line, parsed: engine, flags, published container ports, mount, image, command."""
    argv = shlex.split(load("triton_container")[which])
    image_at = argv.index(load("triton_container")["image"])
    flags = argv[2:image_at]
    return {
        "engine": argv[:2],
        "gpus": any(f.startswith("--gpus") for f in flags),
        "ports": sorted(int(f.split(":")[-1]) for f in flags if f.startswith("-p")),
        "mounts": [f.split(":")[1] for f in flags if f.startswith("-v")],
        "command": argv[image_at + 1 :],
    }


def _ours(argv: list[str], image: str) -> dict:
    image_at = argv.index(image)
    flags = argv[2:image_at]
    values = [flags[i + 1] for i, f in enumerate(flags) if f in ("-p", "-v")]
    return {
        "engine": argv[:2],
        "gpus": any(f.startswith("--gpus") for f in flags),
        "ports": sorted(
            int(v.split(":")[-1]) for v in values if v.count(":") == 2 and v[0].isdigit()
        ),
        "mounts": [v.split(":")[1] for v in values if v.startswith("/")],
        "command": argv[image_at + 1 :],
    }


@pytest.mark.parametrize("which, gpus", [("gpu", True), ("cpu", False)])
def test_the_container_command_line_is_the_documented_one(tmp_path, which, gpus):
    image = "nvcr.io/nvidia/tritonserver:24.10-py3"
    container = launcher.ContainerLauncher("docker", image)
    argv = container.command(
        str(tmp_path), tmp_path, (18000, 18001, 18002), ["--model-control-mode=explicit"], gpus=gpus
    )
    documented, ours = _documented(which), _ours(argv, image)
    assert ours["engine"] == documented["engine"] and ours["gpus"] == documented["gpus"]
    assert (
        ours["ports"] == documented["ports"] == sorted(load("triton_container")["ports"].values())
    )
    assert ours["mounts"] == documented["mounts"] == [load("triton_container")["mount"]]
    assert (
        ours["command"][:2] == documented["command"]
    )  # the image's own tritonserver on the mounted repository
    assert ours["command"][2:] == ["--model-control-mode=explicit"]
    # published on the loopback address only, at the ports this run chose; mounted read-only
    assert "127.0.0.1:18000:8000" in argv and f"{tmp_path}:/models:ro" in argv
    assert "--rm" in argv and "PYTHONDONTWRITEBYTECODE=1" in argv


def test_a_cloud_repository_is_passed_through_with_its_credentials_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t")
    argv = launcher.ContainerLauncher("podman", "img").command(
        "s3://bucket/repo", tmp_path, (1, 2, 3), [], gpus=False
    )
    assert argv[:2] == ["podman", "run"] and "--model-repository=s3://bucket/repo" in argv
    assert "-v" not in argv and "AWS_SECRET_ACCESS_KEY" in argv and "s3cr3t" not in " ".join(argv)


def test_launcher_for_picks_the_launcher(tmp_path):
    chosen = launcher.launcher_for(ServingTarget("docker:nvcr.io/nvidia/tritonserver:24.10-py3"))
    assert isinstance(chosen, launcher.ContainerLauncher) and chosen.image.endswith(":24.10-py3")
    assert chosen.describe() == "in docker image nvcr.io/nvidia/tritonserver:24.10-py3"
    binary = tmp_path / "tritonserver"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert (
        launcher.launcher_for(ServingTarget(binary)).binary == binary.resolve()
        and launcher.launcher_for(ServingTarget(binary)).chosen
    )
    binary.chmod(0o644)
    with pytest.raises(launcher.UsageError, match="not an executable file"):
        launcher.launcher_for(ServingTarget(binary))
