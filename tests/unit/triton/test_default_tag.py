"""One default serving image tag (tritonbuild.triton.images.DEFAULT_TAG): the recipe defaults, the
Kubernetes stock image, the CLI's --image default, Dockerfile.triton's TRITON_VERSION and the CI
templates' serving image all read it or are checked against it; no other builder module spells it."""

from __future__ import annotations

import re

from tests.conftest import ROOT
from tritonbuild.triton.images import DEFAULT_TAG, NGC, default_image

IMAGE_REFERENCE = re.compile(r"tritonserver:(\d\d\.\d\d)-")


def test_the_tag_is_spelt_once_in_builder():
    """A new image release changes one line of builder/: the default tag is written nowhere else
    (image tables are package data, not Python)."""
    here = ROOT / "builder" / "triton" / "images.py"
    spelt = {
        f"{p.relative_to(ROOT)}:{n}"
        for p in sorted((ROOT / "builder").rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if DEFAULT_TAG in line and not (p == here and line.startswith("DEFAULT_TAG = "))
    }
    assert not spelt, f"the default tag {DEFAULT_TAG} is spelt outside DEFAULT_TAG: {sorted(spelt)}"


def test_every_builder_default_is_the_default_tag():
    from tritonbuild.backends.tensorrtllm.recipe.model import Image
    from tritonbuild.backends.vllm.recipe import VLLMImage
    from tritonbuild.cli.deploy import deploy_snippets_command
    from tritonbuild.publish.k8s_fleet import STOCK_IMAGE

    assert Image().triton_image == f"{NGC}:{DEFAULT_TAG}-trtllm-python-py3"
    assert VLLMImage().triton_image == f"{NGC}:{DEFAULT_TAG}-vllm-python-py3"
    assert STOCK_IMAGE == default_image("py3") == f"{NGC}:{DEFAULT_TAG}-py3"
    option = next(p for p in deploy_snippets_command.params if p.name == "image")
    assert option.default == STOCK_IMAGE


def test_dockerfile_and_ci_templates_use_the_default_tag():
    """Files outside the package cannot import it: each is checked against it instead."""
    dockerfile = (ROOT / "Dockerfile.triton").read_text()
    assert re.findall(r"^ARG TRITON_VERSION=(\S+)$", dockerfile, re.M) == [DEFAULT_TAG]
    assert set(re.findall(r"TRITON_VERSION=(\d\d\.\d\d)", dockerfile)) == {DEFAULT_TAG}
    for name in ("github-actions.yml", "gitlab-ci.yml"):
        tags = IMAGE_REFERENCE.findall((ROOT / "ci" / "templates" / name).read_text())
        assert tags and set(tags) == {DEFAULT_TAG}, name
