"""Kubernetes Deployment + Service for a built repository: probes sized from the repository, a readiness probe
that runs a golden inference (ci/docker/healthcheck.py in the Dockerfile.triton image)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import yaml

from tritonbuild.errors import TritonBuildError, UsageError
from tritonbuild.repository.manifest import Manifest

GIB = 1 << 30
# What ci/docker/entrypoint.sh syncs into /models at the pod's start (any other target makes it exit 2).
SYNCED_SCHEMES = ("s3",)
DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")  # RFC 1035 label: Service names must be one


def check_options(*, name: str, target: str | None, replicas: int, **_) -> None:
    """Refuse what the cluster or the image's entrypoint would refuse later, after a rollout began."""
    if not DNS_LABEL.fullmatch(name):
        raise UsageError(f"--name {name!r} is not a DNS label (RFC 1035), which Deployment and Service names must "
                         "be", hint="use lower-case letters, digits and '-', starting with a letter, at most 63")
    if replicas < 0:
        raise UsageError(f"--replicas {replicas}: expected 0 or more")
    if target is None:
        return
    from tritonbuild.core.stores import parse_location

    try:
        location = parse_location(target)
    except TritonBuildError as e:
        raise UsageError(f"--target: {e.message}", where=e.where, hint=e.hint) from None
    if location.scheme not in SYNCED_SCHEMES:
        raise UsageError(f"--target {location}: the serving image's entrypoint syncs only "
                         f"{', '.join(s + '://' for s in SYNCED_SCHEMES)} at start; the pod would exit 2",
                         hint="publish to an s3:// target for the pods, or leave --target out to serve the "
                              "repository baked into the image")


def startup_budget_s(manifest: Manifest) -> int:
    """Seconds a server may need to load this repository: a base minute plus 60 s per GiB of artifacts
    (an engine is read from disk, deserialised and warmed up)."""
    size = sum(entry.size for entry in manifest.files.values())
    return 60 + math.ceil(size / GIB * 60)


def deployment(manifest: Manifest, *, name: str, image: str, target: str | None, replicas: int) -> list[dict]:
    budget = startup_budget_s(manifest)
    gpus = any(model.target == "gpu" for model in manifest.models)
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "tritonbuild"}
    env = [{"name": "TRITON_MODEL_CONTROL", "value": "none"}]
    if target:
        env.append({"name": "TRITONBUILD_TARGET", "value": target})
    container = {
        "name": "tritonserver", "image": image, "env": env,
        "ports": [{"name": "http", "containerPort": 8000}, {"name": "grpc", "containerPort": 8001},
                  {"name": "metrics", "containerPort": 8002}],
        "startupProbe": {"httpGet": {"path": "/v2/health/live", "port": "http"}, "periodSeconds": 10,
                         "failureThreshold": math.ceil(budget / 10)},
        "readinessProbe": {"exec": {"command": ["python3", "/opt/tritonbuild/healthcheck.py", "--repository",
                                                "/models", "--url", "http://127.0.0.1:8000"]},
                           "periodSeconds": 30, "timeoutSeconds": 20, "failureThreshold": 2},
        "livenessProbe": {"httpGet": {"path": "/v2/health/live", "port": "http"}, "periodSeconds": 15,
                          "failureThreshold": 4},
        "resources": {"limits": {"nvidia.com/gpu": 1}} if gpus else {"requests": {"cpu": "2", "memory": "4Gi"}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if target:
        container["volumeMounts"].append({"name": "models", "mountPath": "/models"})
    volumes = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]
    if target:
        volumes.append({"name": "models", "emptyDir": {}})
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
              "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                       "template": {"metadata": {"labels": labels,
                                                 "annotations": {"tritonbuild/manifest-sha256": manifest.digest}},
                                    "spec": {"containers": [container], "volumes": volumes}}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": labels},
               "spec": {"selector": labels, "ports": [{"name": port["name"], "port": port["containerPort"],
                                                       "targetPort": port["name"]} for port in container["ports"]]}}
    return [deploy, service]


def write(manifest: Manifest, out: Path, **options) -> Path:
    check_options(**options)
    docs = deployment(manifest, **options)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{options['name']}.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path
