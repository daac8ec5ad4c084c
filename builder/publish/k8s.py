"""Kubernetes manifests for a built repository that run on the stock NGC tritonserver image: a
ConfigMap (the readiness probe, probe.py, with the models the pods must serve and their
goldens), a Deployment whose tritonserver reads the publish target itself (poll mode follows each
publish; explicit mode loads on `publish --notify`), a Service, a HorizontalPodAutoscaler on
Triton's queue metric and a PodDisruptionBudget. Credentials come from a Secret the operator
creates; nothing is baked into an image. Without --target the image's own /models is served (an
image built from Dockerfile.triton: the custom-image variant).

What tritonserver in the pod is given (its command line, GPUs, startup budget, the probe's files) is
publish/k8s_pod.py's. Facts the manifests rest on (tests/contracts/facts/kubernetes.json): the stock
image's python3 and numpy (server build.py), the queue metric's name (server
docs/user_guide/metrics.md).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import yaml

from tritonbuild.errors import UsageError
from tritonbuild.publish.k8s_fleet import (
    CONTAINER_SECURITY,
    DeployOptions,
    disruption_budget,
    fleet_notes,
    gpu_scheduling,
    lifecycle_header,
    pod_security,
    root_needed,
)
from tritonbuild.publish.k8s_pod import (
    check_plugin_builds,
    gpus_per_pod,
    model_imports,
    probe_files,
    repository_url,
    start,
    startup_budget_s,
    write_requirements,
)
from tritonbuild.repository.manifest import Manifest

DNS_LABEL = re.compile(
    r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
)  # RFC 1035 label: Service names must be one
PROBE_FOLDER = "/etc/tritonbuild"
QUEUE_METRIC = (
    "nv_inference_pending_request_count"  # a gauge per model: requests waiting for a backend
)
CONTROL_MODES = ("poll", "explicit")


class NoAliasDumper(yaml.SafeDumper):
    """Plain YAML: a dict used twice (the labels) is written twice, never as an &id001 anchor and
    *id001 alias."""

    def ignore_aliases(self, data) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, data: str):
    """A multi-line string (the probe script) as a literal block, readable in the manifest."""
    return dumper.represent_scalar(
        "tag:yaml.org,2002:str", data, style="|" if "\n" in data else None
    )


NoAliasDumper.add_representer(str, _text)


def check_options(options: DeployOptions) -> None:
    """Refuse what the cluster or tritonserver would refuse later, after a rollout began."""
    name, target, replicas, image = options.name, options.target, options.replicas, options.image
    max_replicas, control, poll_secs = options.max_replicas, options.control, options.poll_secs
    if not DNS_LABEL.fullmatch(name):
        raise UsageError(
            f"--name {name!r} is not a DNS label (RFC 1035), which Deployment and Service names "
            "must be",
            hint="use lower-case letters, digits and '-', starting with a letter, at most 63",
        )
    if replicas < 1:
        raise UsageError(
            f"--replicas {replicas}: expected 1 or more (the autoscaler's minimum)",
            hint="scale a deployment to 0 with kubectl scale, not in its manifest",
        )
    if max_replicas is not None and max_replicas < replicas:
        raise UsageError(
            f"--max-replicas {max_replicas}: expected at least --replicas ({replicas})"
        )
    if control not in CONTROL_MODES:
        raise UsageError(
            f"--model-control-mode {control!r}: expected one of {', '.join(CONTROL_MODES)}"
        )
    if poll_secs < 1:
        raise UsageError(f"--repository-poll-secs {poll_secs}: expected 1 or more")
    if target is not None:
        repository_url(target, options.endpoint)
    elif image.startswith("nvcr.io/nvidia/tritonserver:"):
        raise UsageError(
            f"--image {image} holds no model repository, and no --target was given for it to read",
            hint="give --target (the publish target the pods serve), or an image built from "
            "Dockerfile.triton with the repository baked in",
        )


def _container(launch: dict, image: str, budget: int, gpus: int, secret_env: dict) -> dict:
    env = launch.pop("env") + secret_env.get("env", [])
    return {
        "name": "tritonserver",
        "image": image,
        **launch,
        **({"env": env} if env else {}),
        **{key: value for key, value in secret_env.items() if key != "env"},
        "ports": [
            {"name": "http", "containerPort": 8000},
            {"name": "grpc", "containerPort": 8001},
            {"name": "metrics", "containerPort": 8002},
        ],
        "startupProbe": {
            "httpGet": {"path": "/v2/health/live", "port": "http"},
            "periodSeconds": 10,
            "failureThreshold": math.ceil(budget / 10),
        },
        "readinessProbe": {
            "exec": {
                "command": [
                    "python3",
                    f"{PROBE_FOLDER}/probe.py",
                    "--folder",
                    PROBE_FOLDER,
                    "--url",
                    "http://127.0.0.1:8000",
                    "--timeout",
                    "8",
                ]
            },
            "periodSeconds": 10,
            "timeoutSeconds": 20,
            "failureThreshold": 2,
        },
        "livenessProbe": {
            "httpGet": {"path": "/v2/health/live", "port": "http"},
            "periodSeconds": 15,
            "failureThreshold": 4,
        },
        "resources": {"limits": {"nvidia.com/gpu": gpus}}
        if gpus
        else {"requests": {"cpu": "2", "memory": "4Gi"}},
        "securityContext": CONTAINER_SECURITY,
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "probe", "mountPath": PROBE_FOLDER, "readOnly": True},
        ],
    }


def _credentials(
    target: str | None, secret: str, endpoint: str | None
) -> tuple[dict, list[dict], list[dict]]:
    """(container env fields, extra volumes, extra mounts) that hand tritonserver the Secret's
    credentials, as the target's store driver says (secret_files, secret_folder)."""
    if target is None:
        return {}, [], []
    driver, _ = repository_url(target, endpoint)
    if not driver.secret_files:  # the Secret's keys are the container's environment
        return {"envFrom": [{"secretRef": {"name": secret}}]}, [], []
    folder = driver.secret_folder  # the Secret mounted, a variable naming each file in it
    return (
        {
            "env": [
                {"name": name, "value": f"{folder}/{file}"} for name, file in driver.secret_files
            ]
        },
        [{"name": "store-credentials", "secret": {"secretName": secret}}],
        [{"name": "store-credentials", "mountPath": folder, "readOnly": True}],
    )


def documents(
    root: Path, manifest: Manifest, options: DeployOptions
) -> tuple[list[dict], list[str]]:
    """(the manifests, models whose goldens the probe could not carry)."""
    name, target, endpoint, control = (
        options.name,
        options.target,
        options.endpoint,
        options.control,
    )
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "tritonbuild"}
    data, binary, left_out = probe_files(root, manifest)
    secret_env, volumes, mounts = _credentials(target, options.secret or f"{name}-store", endpoint)
    gpus = gpus_per_pod(root, manifest)
    container = _container(
        start(manifest, target, control, options.poll_secs, endpoint),
        options.image,
        startup_budget_s(manifest),
        gpus,
        secret_env,
    )
    container["volumeMounts"] += mounts
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-probe", "labels": labels},
        "data": data,
        **({"binaryData": binary} if binary else {}),
    }
    pod = {
        "securityContext": pod_security(root_needed(manifest, target)),
        **gpu_scheduling(manifest, gpus, options.gpu_node_selector),
    }
    deploy = _deployment(name, labels, options.replicas, manifest.digest, container, volumes, pod)
    # NOTE: publish --notify must reach every pod, not one of them: a headless Service lists them
    every_pod = control == "explicit" and target is not None
    services = _services(name, labels, container["ports"], every_pod)
    replicas = options.replicas
    scaling = _scaling(
        name, labels, replicas, options.max_replicas or replicas * 3, options.queue_target
    )
    return [config_map, deploy, *services, *scaling], left_out


def _deployment(
    name: str,
    labels: dict,
    replicas: int,
    digest: str,
    container: dict,
    volumes: list[dict],
    fleet: dict,
) -> dict:
    """The Deployment: one tritonserver container per pod, its shared memory, the probe's ConfigMap
    and the store's credentials mounted, its securityContext and GPU scheduling (fleet), rolled out
    one new pod before an old one goes."""
    pod = {
        **fleet,
        "containers": [container],
        "terminationGracePeriodSeconds": 60,
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
            {"name": "probe", "configMap": {"name": f"{name}-probe"}},
            *volumes,
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            # NOTE: a new pod comes up (and passes its probe) before an old one goes: never the last
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {"tritonbuild/manifest-sha256": digest},
                },
                "spec": pod,
            },
        },
    }


def _services(name: str, labels: dict, container_ports: list[dict], every_pod: bool) -> list[dict]:
    """The Service in front of the pods, and with every_pod a headless one that lists each pod."""
    ports = [
        {"name": port["name"], "port": port["containerPort"], "targetPort": port["name"]}
        for port in container_ports
    ]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {"selector": labels, "ports": ports},
    }
    if not every_pod:
        return [service]
    headless = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{name}-pods", "labels": labels},
        "spec": {"clusterIP": "None", "selector": labels, "ports": ports},
    }
    return [service, headless]


def _scaling(
    name: str, labels: dict, replicas: int, max_replicas: int, queue_target: int
) -> list[dict]:
    """An autoscaler on the requests waiting in Triton's queues (per pod, through a custom-metrics
    adapter such as prometheus-adapter scraping port 'metrics'), and a disruption budget that
    never blocks a node drain (k8s_fleet.disruption_budget)."""
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": replicas,
            "maxReplicas": max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": QUEUE_METRIC},
                        "target": {"type": "AverageValue", "averageValue": str(queue_target)},
                    },
                }
            ],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}},
        },
    }
    budget = disruption_budget()
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "labels": labels},
        "spec": {**budget, "selector": {"matchLabels": labels}},
    }
    return [hpa, pdb]


def render(docs: list[dict]) -> str:
    return yaml.dump_all(docs, Dumper=NoAliasDumper, sort_keys=False, allow_unicode=True)


def write(
    root: Path, manifest: Manifest, out: Path, options: DeployOptions
) -> tuple[Path, int, list[str], tuple[str, ...], list[str]]:
    """Check the options, then write OUT/NAME.yaml: (its path, the startup budget in seconds, models
    whose goldens the probe leaves out, what the models import that the image must add: also
    written to OUT/requirements-models.txt, what the operator must know: fleet_notes)."""
    check_options(options)
    check_plugin_builds(root, manifest)
    docs, left_out = documents(root, manifest, options)
    notes = fleet_notes(root, manifest, options)
    text = lifecycle_header(options.name, manifest.digest) + render(docs)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{options.name}.yaml"
    path.write_text(text)
    imports = model_imports(root, options.image)
    write_requirements(out, options.image, imports)
    return path, startup_budget_s(manifest), left_out, imports, notes
