"""deploy-snippets' Kubernetes manifests: strict against three Kubernetes releases' OpenAPI schemas
(kubernetes-validate), plain YAML, and built on what tritonserver and the stock image have
(tests/contracts/facts/kubernetes.json)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess

import pytest
import yaml

from tests.ci_templates.test_templates import _tool
from tests.contracts.facts import load

RELEASES = ("1.30.0", "1.33.0", "1.37.0")
MODES = {
    "poll": ["--target", "s3://bucket/models"],
    "explicit": ["--target", "s3://bucket/models", "--model-control-mode", "explicit"],
    "gcs": ["--target", "gs://bucket/models"],
    "baked": ["--image", "registry.example/models:1"],
}


def _generate(cli, tmp_path, *args) -> tuple[list[dict], str]:
    out = tmp_path / "deploy"
    r = cli("deploy-snippets", "model_repository", "-o", out, "--replicas", "2", *args, "--json")
    assert r.exit_code == 0, r.stderr
    text = (out / "tritonserver.yaml").read_text()
    return list(yaml.safe_load_all(text)), text


def _by_kind(docs: list[dict]) -> dict[str, dict]:
    return {doc["kind"]: doc for doc in docs}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_manifests_validate_strictly_against_three_kubernetes_releases(
    cli, tmp_path, in_root, mode
):
    docs, text = _generate(cli, tmp_path, *MODES[mode])
    assert {
        "ConfigMap",
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
    } <= {doc["kind"] for doc in docs}
    assert (
        "&id" not in text and "*id" not in text
    )  # the labels, used five times, are written out each time
    path = tmp_path / "deploy" / "tritonserver.yaml"
    for release in RELEASES:
        checked = subprocess.run(
            [_tool("kubernetes-validate"), "--strict", "-k", release, str(path)],
            capture_output=True,
            text=True,
        )
        assert checked.returncode == 0, (release, checked.stdout + checked.stderr)


def test_the_pod_needs_nothing_but_the_stock_image_and_what_it_mounts(cli, tmp_path, in_root):
    docs, _ = _generate(cli, tmp_path, *MODES["poll"])
    kinds = _by_kind(docs)
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    from tritonbuild.publish.k8s_fleet import STOCK_IMAGE

    assert container["image"] == STOCK_IMAGE  # the CLI's default is the module's
    assert container["image"].startswith("nvcr.io/nvidia/tritonserver:") and container[
        "image"
    ].endswith("-py3")
    assert container["command"] == ["tritonserver"]
    probe = container["readinessProbe"]["exec"]["command"]
    assert (
        probe[0] == "python3"
    )  # the stock image's (facts: build.py installs python3 and numpy for its backend)
    assert "python3" in load("kubernetes")["stock_image_python"]["python_backend_installs"]
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    (script,) = [word for word in probe if word.endswith(".py")]
    folder = script.rsplit("/", 1)[0]
    (probe_volume,) = [name for name, path in mounts.items() if path == folder]
    config_map = kinds["ConfigMap"]
    assert volumes[probe_volume]["configMap"]["name"] == config_map["metadata"]["name"]
    assert script.rsplit("/", 1)[1] in config_map["data"] and "expect.json" in config_map["data"]
    expected = yaml.safe_load(config_map["data"]["expect.json"])
    assert {model["name"] for model in expected["models"]} == {
        path.name for path in (in_root / "model_repository").iterdir() if path.is_dir()
    }
    assert all(
        key in config_map.get("binaryData", {})
        for model in expected["models"]
        for key in model["goldens"].values()
    )
    assert container["envFrom"] == [{"secretRef": {"name": "tritonserver-store"}}]


@pytest.mark.parametrize("mode", ["poll", "explicit"])
def test_the_command_line_is_tritonservers_own_flags(cli, tmp_path, in_root, mode):
    docs, _ = _generate(cli, tmp_path, *MODES[mode])
    (container,) = _by_kind(docs)["Deployment"]["spec"]["template"]["spec"]["containers"]
    facts = load("kubernetes")["server_flags"]
    flags = dict(arg[2:].split("=", 1) for arg in container["args"])
    assert set(flags) <= set(facts["flags"])
    assert all(flags[name] in ("true", "false") for name in facts["bool_flags"] if name in flags)
    assert flags["model-control-mode"] == mode and mode in facts["model_control_modes"]
    assert flags["model-repository"] == "s3://bucket/models"
    # strict readiness is what takes every polling pod out of its Service while a publish loads
    assert (
        flags["strict-readiness"] == "false"
        and load("kubernetes")["strict_readiness"]["default"] is True
    )
    if mode == "explicit":
        assert f"--load-model={flags['load-model']}" == facts["load_all_in_explicit"]


def test_scaling_rolls_out_without_taking_the_last_ready_pod(cli, tmp_path, in_root):
    docs, _ = _generate(cli, tmp_path, *MODES["poll"], "--max-replicas", "5", "--queue-target", "4")
    kinds = _by_kind(docs)
    rolling = kinds["Deployment"]["spec"]["strategy"]["rollingUpdate"]
    assert rolling["maxUnavailable"] == 0 and rolling["maxSurge"] >= 1
    hpa = kinds["HorizontalPodAutoscaler"]["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (2, 5)
    (metric,) = hpa["metrics"]
    assert metric["pods"]["metric"]["name"] == load("kubernetes")["queue_metric"]["name"]
    assert metric["pods"]["target"]["averageValue"] == "4"
    assert kinds["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1
    selector = kinds["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"]
    assert selector == kinds["Deployment"]["spec"]["template"]["metadata"]["labels"]


def test_explicit_mode_adds_a_headless_service_that_reaches_every_pod(cli, tmp_path, in_root):
    docs, _ = _generate(cli, tmp_path, *MODES["explicit"])
    services = [doc for doc in docs if doc["kind"] == "Service"]
    assert [service["spec"].get("clusterIP") for service in services] == [None, "None"]


def test_gpu_resources_come_from_the_instance_groups(tmp_path, in_root):
    from tritonbuild.publish.k8s_pod import gpus_per_pod
    from tritonbuild.repository.manifest import read_manifest

    root = tmp_path / "repo"
    shutil.copytree(in_root / "model_repository", root)
    manifest = read_manifest(root)
    assert gpus_per_pod(root, manifest) == 0  # every group KIND_CPU: no GPU asked for
    config = root / "risk-scorer" / "config.pbtxt"
    config.write_text(
        config.read_text().replace("kind: KIND_CPU", "kind: KIND_GPU\n  gpus: [0, 2]")
    )
    assert gpus_per_pod(root, manifest) == 3
    # a backend that places its own devices says how many (Backend.gpus_needed): vLLM's model.json
    (model,) = [model for model in manifest.models if model.name == "risk-scorer"]
    (root / "risk-scorer" / str(model.version) / "model.json").write_text(
        '{"tensor_parallel_size": 2, "pipeline_parallel_size": 2}'
    )
    config.write_text(config.read_text().replace('backend: "python"', 'backend: "vllm"'))
    assert gpus_per_pod(root, manifest) == 4


@pytest.mark.parametrize(
    "args, words",
    [
        (
            ["--target", "file:///srv/models"],
            "s3://, gs://",
        ),  # tritonserver cannot read that store itself
        (["--target", "models/prod"], "not a URL"),
        (
            ["--target", "s3://AKIA:hunter2@bucket/models"],
            "credentials",
        ),  # it would be written into the YAML
        (["--name", "Triton_Server"], "DNS label"),
        (["--replicas", "0"], "--replicas"),
        (["--replicas", "3", "--max-replicas", "2"], "--max-replicas"),
        ([], "holds no model repository"),  # the stock image, and no target to read
    ],
)
def test_manifests_refuse_what_the_pod_could_not_use(cli, tmp_path, in_root, args, words):
    out = tmp_path / "deploy"
    r = cli("deploy-snippets", "model_repository", "-o", out, *args)
    assert r.exit_code == 2, r.stderr
    assert words in r.stderr and "hunter2" not in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()


def test_the_custom_image_variant_runs_its_entrypoint_without_strict_readiness(
    cli, tmp_path, in_root
):
    """No --target: the image built from Dockerfile.triton serves its baked /models through its entrypoint (which
    applies the models' launch needs), told by the manifest to leave strict readiness off."""
    docs, _ = _generate(cli, tmp_path, *MODES["baked"])
    (container,) = _by_kind(docs)["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert "command" not in container  # the image's ENTRYPOINT
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "tritonserver").write_text('#!/bin/sh\necho "$*"\n')
    (fake / "tritonserver").chmod(stat.S_IRWXU)
    env = {
        **os.environ,
        "PATH": f"{fake}:{os.environ['PATH']}",
        **{item["name"]: item["value"] for item in container["env"]},
        "TRITONBUILD_MODELS": str(in_root / "model_repository"),
    }
    got = subprocess.run(
        ["bash", str(in_root / "ci/docker/entrypoint.sh"), *container["args"]],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "--strict-readiness=false" in got and "--model-control-mode=none" in got
    assert "--exit-on-error=false" in got


def test_what_the_models_import_beyond_the_stock_images_python_is_said_and_written(
    cli, tmp_path, in_root, py_recipe
):
    """The stock image's Python backend has python3 and numpy < 2 (facts: build.py); a model
    importing torch (risk-scorer) does not load there. deploy-snippets names it, at the version
    verified here, and writes the requirements file an image built FROM the stock one installs;
    a repository importing nothing more writes none (and removes an earlier one)."""
    import json
    from importlib import metadata

    from tritonbuild.server.mirror import KEPT

    assert "numpy<2" in load("kubernetes")["stock_image_python"]["python_backend_installs"]
    assert "numpy" in KEPT  # what the image has is not asked for
    out = tmp_path / "deploy"
    r = cli("deploy-snippets", "model_repository", "-o", out, *MODES["poll"], "--json")
    shown = json.loads(r.stdout)
    torch = f"torch=={metadata.version('torch')}"
    assert shown["model_imports"] == [torch]
    written = (out / "requirements-models.txt").read_text()
    assert shown["requirements"] == str(out / "requirements-models.txt")
    from tritonbuild.publish.k8s_fleet import STOCK_IMAGE

    assert f"#   FROM {STOCK_IMAGE}\n" in written and written.endswith(f"\n{torch}\n")
    # the file as pip reads it: comments skipped, each line a requirement by pip's own parser
    from pip._vendor.packaging.requirements import Requirement as PipRequirement

    lines = [line for line in written.splitlines() if line and not line.startswith("#")]
    assert [PipRequirement(line).name for line in lines] == ["torch"]
    r = cli("deploy-snippets", "model_repository", "-o", out, *MODES["poll"])
    assert f"warning: the models import what {STOCK_IMAGE} does not ship" in r.stderr
    assert torch in r.stderr
    built = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", built).exit_code == 0
    r = cli("deploy-snippets", built, "-o", out, *MODES["poll"], "--json")
    assert json.loads(r.stdout)["model_imports"] == [] and "warning" not in r.stderr
    assert not (out / "requirements-models.txt").exists()


def _disruptions_allowed(pdb: dict, expected: int, healthy: int) -> int:
    """Kubernetes' disruption controller (facts: disruption_rule): evictions a budget allows."""
    rule = load("kubernetes")["disruption_rule"]["rule"]
    assert "desiredHealthy = expectedCount (the controller's scale) - maxUnavailable" in rule
    assert "integer minAvailable: desiredHealthy = minAvailable" in rule
    assert "disruptionsAllowed = currentHealthy - desiredHealthy" in rule
    desired = (
        max(0, expected - pdb["maxUnavailable"]) if "maxUnavailable" in pdb else pdb["minAvailable"]
    )
    return max(0, healthy - desired)


@pytest.mark.parametrize("replicas", [1, 2, 5])
def test_the_disruption_budget_lets_a_drain_evict_one_pod_at_a_time(
    cli, tmp_path, in_root, replicas
):
    """replicas: 1 with minAvailable: 1 allowed no eviction: kubectl drain waited forever (issue 43). Every
    healthy Deployment now allows exactly one, and one replica is said to go down during a drain."""
    out = tmp_path / "deploy"
    r = cli(
        "deploy-snippets",
        "model_repository",
        "-o",
        out,
        "--replicas",
        str(replicas),
        *MODES["poll"],
    )
    assert r.exit_code == 0, r.stderr
    pdb = _by_kind(list(yaml.safe_load_all((out / "tritonserver.yaml").read_text())))
    spec = pdb["PodDisruptionBudget"]["spec"]
    assert _disruptions_allowed(spec, replicas, replicas) == 1
    assert (
        _disruptions_allowed(spec, replicas, replicas - 1) == 0
    )  # one already out: the next waits
    assert ("a node drain evicts the only pod" in r.stdout) is (replicas == 1)


def test_a_local_endpoint_is_never_written_into_the_pods_repository_url(
    cli, tmp_path, in_root, monkeypatch
):
    """AWS_ENDPOINT_URL on this machine (a local MinIO or moto) was written into --model-repository without a
    word: every pod looked for the store on itself. Refused; --endpoint-url gives the cluster's; a
    non-local one from the environment is said."""
    out = tmp_path / "deploy"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    r = cli("deploy-snippets", "model_repository", "-o", out, *MODES["poll"])
    assert r.exit_code == 2, r.stdout
    assert "AWS_ENDPOINT_URL=http://127.0.0.1:9000" in r.stderr and "--endpoint-url" in r.stderr
    assert "Traceback" not in r.stderr and not out.exists()
    cluster = "http://minio.storage.svc:9000"
    r = cli(
        "deploy-snippets", "model_repository", "-o", out, *MODES["poll"], "--endpoint-url", cluster
    )
    assert r.exit_code == 0, r.stderr
    (container,) = _by_kind(list(yaml.safe_load_all((out / "tritonserver.yaml").read_text())))[
        "Deployment"
    ]["spec"]["template"]["spec"]["containers"]
    url = f"s3://{cluster}/bucket/models"  # tritonserver's form (facts: store_credentials)
    assert f"--model-repository={url}" in container["args"]
    assert (
        url.startswith("s3://http://")
        and "s3://[http(s)://]host:port/"
        in load("kubernetes")["store_credentials"]["s3_endpoint_form"]
    )
    assert f"the pods read {url} (the S3 endpoint from --endpoint-url)" in r.stdout
    monkeypatch.setenv("AWS_ENDPOINT_URL", cluster)
    r = cli("deploy-snippets", "model_repository", "-o", out, *MODES["poll"], "--json")
    assert r.exit_code == 0, r.stderr
    assert (
        f"the pods read {url} (the S3 endpoint from AWS_ENDPOINT_URL)"
        in json.loads(r.stdout)["notes"]
    )


def test_the_pods_run_without_root_or_privileges_where_the_image_allows(cli, tmp_path, in_root):
    """A securityContext (none before): the stock image's own non-root user (facts: nonroot_user), no
    privilege escalation, every capability dropped, the runtime's seccomp profile; fields validated against
    the Kubernetes schemas by the strict test above (all modes)."""
    facts = load("kubernetes")["nonroot_user"]
    for mode in ("poll", "baked"):
        docs, _ = _generate(cli, tmp_path / mode, *MODES[mode])
        pod = _by_kind(docs)["Deployment"]["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == facts["uid"]
        assert pod["securityContext"]["runAsGroup"] == facts["gid"]
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        (container,) = pod["containers"]
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "capabilities": {"drop": ["ALL"]},
        }


def test_the_output_says_the_configmaps_goldens_follow_each_publish(cli, tmp_path, in_root):
    """The ConfigMap holds the goldens of the versions built now; after a publish the probe has none for the
    new versions until it is regenerated. Said in the output, the --json notes and the YAML itself."""
    out = tmp_path / "deploy"
    r = cli("deploy-snippets", "model_repository", "-o", out, *MODES["poll"])
    assert r.exit_code == 0, r.stderr
    said = "after each publish that changes a model, run deploy-snippets again"
    assert "tritonserver-probe" in r.stdout and said in r.stdout
    text = (out / "tritonserver.yaml").read_text()
    assert text.startswith("# ") and said in text.split("\n---")[0]
    assert any(
        said in note
        for note in json.loads(
            cli("deploy-snippets", "model_repository", "-o", out, *MODES["poll"], "--json").stdout
        )["notes"]
    )


def _gpu_repository(tmp_path, in_root):
    root = tmp_path / "repo"
    shutil.copytree(in_root / "model_repository", root)
    config = root / "risk-scorer" / "config.pbtxt"
    config.write_text(
        config.read_text().replace("kind: KIND_CPU", "kind: KIND_GPU\n  gpus: [0, 1]")
    )
    return root


def test_gpu_pods_tolerate_gpu_nodes_and_ask_for_the_device_plugins_resource(
    cli, tmp_path, in_root
):
    """Two GPUs from the instance groups: the device plugin's resource, and the toleration Kubernetes' own
    ExtendedResourceToleration gives such a pod (facts), which the manifest carried nowhere: on GPU nodes
    tainted as clusters taint them the pod never scheduled. --gpu-node-selector names the nodes."""
    root = _gpu_repository(tmp_path, in_root)
    out = tmp_path / "deploy"
    r = cli("deploy-snippets", root, "-o", out, *MODES["poll"], "--gpu-node-selector", "pool=gpu")
    assert r.exit_code == 0, r.stderr
    pod = _by_kind(list(yaml.safe_load_all((out / "tritonserver.yaml").read_text())))["Deployment"][
        "spec"
    ]["template"]["spec"]
    facts = load("kubernetes")["extended_resource_toleration"]
    (container,) = pod["containers"]
    assert container["resources"]["limits"] == {facts["resource"]: 2}
    assert pod["tolerations"] == [{**facts["toleration"], "key": facts["resource"]}]
    assert pod["nodeSelector"] == {"pool": "gpu"}
    checked = subprocess.run(
        [
            _tool("kubernetes-validate"),
            "--strict",
            "-k",
            RELEASES[-1],
            str(out / "tritonserver.yaml"),
        ],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    bad = cli(
        "deploy-snippets",
        root,
        "-o",
        tmp_path / "bad",
        *MODES["poll"],
        "--gpu-node-selector",
        "gpu",
    )
    assert bad.exit_code == 2 and "KEY=VALUE" in bad.stderr


VLLM_RECIPE = """\
name: {name}
version: 1
backend: vllm
checkpoint: {{path: {ckpt}}}
engine_args: {{dtype: float16, max_num_seqs: 16, enforce_eager: true}}
gpu: {gpu}
image: {{triton_image: "nvcr.io/nvidia/tritonserver:26.06-vllm-python-py3"}}
"""


def _llm_repository(tmp_path, gpus: dict[str, str]):
    from tests.conftest import EXAMPLES
    from tritonbuild import api

    tmp_path.mkdir(exist_ok=True)
    recipes = []
    for name, gpu in gpus.items():
        recipe = tmp_path / f"{name}.yaml"
        recipe.write_text(VLLM_RECIPE.format(name=name, gpu=gpu, ckpt=EXAMPLES / "tiny-llama"))
        recipes.append(recipe)
    api.build_repository(recipes, tmp_path / "llm-repo")
    return tmp_path / "llm-repo"


def test_gpu_nodes_are_chosen_by_the_gpu_the_models_were_planned_for(cli, tmp_path, monkeypatch):
    """A vLLM model planned for an H100 (recipe gpu:) runs on nodes GPU feature discovery labels with the
    H100's compute capability and at least its memory (facts: gpu_feature_discovery_labels); models planned
    for different GPUs cannot share one pod's node: refused with the fix."""
    from tritonbuild.backends.llm.gpus import GPU_MEMORY_MIB

    monkeypatch.chdir(tmp_path)
    root = _llm_repository(tmp_path, {"chat": "H100"})
    out = tmp_path / "deploy"
    r = cli("deploy-snippets", root, "-o", out, *MODES["poll"])
    assert r.exit_code == 0, r.stderr
    pod = _by_kind(list(yaml.safe_load_all((out / "tritonserver.yaml").read_text())))["Deployment"][
        "spec"
    ]["template"]["spec"]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    labels = {e["key"]: (e["operator"], e["values"]) for e in term["matchExpressions"]}
    assert set(labels) <= set(load("kubernetes")["gpu_feature_discovery_labels"]["labels"])
    assert labels["nvidia.com/gpu.compute.major"] == ("In", ["9"])
    assert labels["nvidia.com/gpu.compute.minor"] == ("In", ["0"])
    op, (least,) = labels["nvidia.com/gpu.memory"]
    assert op == "Gt" and 0.9 * GPU_MEMORY_MIB["H100"] < int(least) < GPU_MEMORY_MIB["H100"]
    assert "H100-class" in r.stdout
    two = _llm_repository(tmp_path / "two", {"chat": "H100", "small": "L4"})
    refused = cli("deploy-snippets", two, "-o", tmp_path / "two-out", *MODES["poll"])
    assert refused.exit_code == 2 and "chat: H100, small: L4" in refused.stderr
    assert "--gpu-node-selector" in refused.stderr and not (tmp_path / "two-out").exists()
