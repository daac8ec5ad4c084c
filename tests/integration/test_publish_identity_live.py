"""Publish identity covers behaviour (issue 43): an ensemble's step changed in its config alone (a parameter the
model reads), bumped, under an ensemble left at its version, was published as 'twice v1 unchanged, identical'; the
target then served twice v1 over the new step, and the readiness probe deploy-snippets ships failed on every pod
polling it. Here a real tritonserver polls a real S3 endpoint (moto_server) with the Deployment's own arguments and
the ConfigMap's probe judges it: the unbumped publish is refused and nothing changes; the bumped one publishes, and
the probe stays ready on the ConfigMap of either build. A parameter changed without a bump is refused too, with
every object at the target as it was."""

from __future__ import annotations

import time
import urllib.request

import pytest

from tests.integration.test_fleet_readiness import ManifestServer, _deploy
from tritonbuild import api
from tritonbuild.errors import PublishError
from tritonbuild.publish.probe import check

pytestmark = [pytest.mark.s3, pytest.mark.slow, pytest.mark.triton]

SCALED = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"])["parameters"]
        self.factor = np.float32(parameters["factor"]["string_value"])

    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", (x * self.factor + 1).astype(np.float32))]))
        return out
"""
STEP = """
name: doubler
version: {version}
backend: python
source: {{path: model.py}}
max_batch_size: 4
inputs: [{{name: X, dtype: fp32, dims: [3]}}]
outputs: [{{name: Y, dtype: fp32, dims: [3]}}]
parameters: {{factor: "{factor}"}}
verify: {{goldens: goldens/doubler.npz, samples: 2}}
"""
ENSEMBLE = """
name: twice
version: {version}
backend: ensemble
max_batch_size: 4
inputs: [{{name: IN, dtype: fp32, dims: [3]}}]
outputs: [{{name: OUT, dtype: fp32, dims: [3]}}]
steps:
  - model: doubler
    inputs: {{X: IN}}
    outputs: {{Y: mid}}
  - model: doubler
    inputs: {{X: mid}}
    outputs: {{Y: OUT}}
verify: {{goldens: goldens/twice.npz, samples: 2}}
"""


def _serves(server, model: str, version: int, within: float = 60.0) -> None:
    url = f"http://{server.http_url}/v2/models/{model}/versions/{version}/ready"
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{model} v{version} was not READY within {within} s")


def _ready(folder, server, within: float = 60.0) -> None:
    deadline, problems = time.monotonic() + within, ["not asked"]
    while time.monotonic() < deadline:
        problems = check(folder, f"http://{server.http_url}", 5)
        if not problems:
            return
        time.sleep(0.3)
    raise AssertionError(f"the probe never passed: {problems}")


def test_a_step_changed_under_a_published_ensemble_keeps_the_probe_ready(
    cli, bucket, s3fs_client, tmp_path
):
    target = f"s3://{bucket}/pipelines"

    def build(tag: str, step: int, factor: str, ensemble: int):
        src = tmp_path / f"src-{tag}"
        src.mkdir()
        (src / "model.py").write_text(SCALED.lstrip())
        (src / "doubler.yaml").write_text(STEP.format(version=step, factor=factor).lstrip())
        (src / "twice.yaml").write_text(ENSEMBLE.format(version=ensemble).lstrip())
        out = tmp_path / f"repo-{tag}"
        r = cli("build", src / "doubler.yaml", src / "twice.yaml", "-o", out)
        assert r.exit_code == 0, r.stderr
        r = cli("verify", out, "--record")
        assert r.exit_code == 0, r.stdout + r.stderr
        return out

    first = build("a", 1, "2", 1)
    api.publish(first, target)
    args, folder = _deploy(first, target, tmp_path / "deploy-a")
    server = ManifestServer(args, tmp_path / "server.log")
    try:
        server.start()
        _ready(folder, server)

        def objects() -> dict:
            found = s3fs_client.find(f"{bucket}/pipelines", detail=True, refresh=True)
            return {path: info.get("ETag") for path, info in found.items()}

        before = objects()
        in_place = build("p", 1, "3", 1)  # one config parameter changed, no version bumped
        with pytest.raises(
            PublishError, match=r"another config.pbtxt \(parameters\['factor'\] differ"
        ):
            api.publish(in_place, target)
        assert objects() == before
        unbumped = build("b", 2, "3", 1)  # the step's parameter changed, the ensemble not bumped
        with pytest.raises(
            PublishError, match=r"twice version 1 .*other models under it \(doubler"
        ):
            api.publish(unbumped, target)
        assert objects() == before
        time.sleep(3)  # three polls: nothing changed at the target, nothing reloads
        _ready(folder, server, within=5)
        bumped = build("c", 2, "3", 2)
        api.publish(bumped, target)
        _serves(server, "doubler", 2)
        _serves(server, "twice", 2)
        _, now = _deploy(bumped, target, tmp_path / "deploy-c")
        _ready(now, server)  # the new ConfigMap's goldens: the served versions answer them
        _ready(folder, server, within=5)  # and the old one's: its versions are no longer served
    finally:
        server.cleanup()
