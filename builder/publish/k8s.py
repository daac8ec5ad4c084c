"""Kubernetes manifests for a built repository that run on the stock NGC tritonserver image: a ConfigMap (the
readiness probe, k8s_probe.py, with the models the pods must serve and their goldens), a Deployment whose
tritonserver reads the publish target itself (poll mode follows each publish; explicit mode loads on
`publish --notify`), a Service, a HorizontalPodAutoscaler on Triton's queue metric and a PodDisruptionBudget.
Credentials come from a Secret the operator creates; nothing is baked into an image. Without --target the
image's own /models is served (an image built from Dockerfile.triton: the custom-image variant).

Facts the manifests rest on (tests/contracts/facts/kubernetes.json): tritonserver's flags (server
src/command_line_parser.cc), strict readiness counting every model (core src/server.cc InferenceServer::IsReady),
the stock image's python3 and numpy (server build.py), the queue metric's name (server docs/user_guide/metrics.md).
"""

from __future__ import annotations

import base64
import json
import math
import re
from pathlib import Path

import yaml

from tritonbuild.errors import TritonBuildError, UsageError
from tritonbuild.repository.manifest import Manifest

GIB = 1 << 30
DNS_LABEL = re.compile(
    r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
)  # RFC 1035 label: Service names must be one
PROBE_FOLDER = "/etc/tritonbuild"
STOCK_IMAGE = "nvcr.io/nvidia/tritonserver:25.12-py3"
QUEUE_METRIC = (
    "nv_inference_pending_request_count"  # a gauge per model: requests waiting for a backend
)
CONFIGMAP_BUDGET = (
    900 * 1024
)  # a ConfigMap holds at most 1 MiB; goldens past this stay out of the probe
CONTROL_MODES = ("poll", "explicit")
# Where tritonserver reads each store's credentials (its own SDK chains), as the Secret must provide them.
SECRET_KEYS = {
    "s3": "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION (and AWS_SESSION_TOKEN)",
    "gs": "key.json (a service account key; GOOGLE_APPLICATION_CREDENTIALS points at it)",
    "az": "AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY",
}
GCS_KEY_FOLDER = "/var/run/secrets/tritonbuild-gcs"


class NoAliasDumper(yaml.SafeDumper):
    """Plain YAML: a dict used twice (the labels) is written twice, never as an &id001 anchor and *id001 alias."""

    def ignore_aliases(self, data) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, data: str):
    """A multi-line string (the probe script) as a literal block, readable in the manifest."""
    return dumper.represent_scalar(
        "tag:yaml.org,2002:str", data, style="|" if "\n" in data else None
    )


NoAliasDumper.add_representer(str, _text)


def check_options(
    *,
    name: str,
    target: str | None,
    replicas: int,
    image: str = STOCK_IMAGE,
    max_replicas: int | None = None,
    control: str = "poll",
    poll_secs: int = 15,
    **_,
) -> None:
    """Refuse what the cluster or tritonserver would refuse later, after a rollout began."""
    if not DNS_LABEL.fullmatch(name):
        raise UsageError(
            f"--name {name!r} is not a DNS label (RFC 1035), which Deployment and Service names must "
            "be",
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
        repository_url(target)
    elif image.startswith("nvcr.io/nvidia/tritonserver:"):
        raise UsageError(
            f"--image {image} holds no model repository, and no --target was given for it to read",
            hint="give --target (the publish target the pods serve), or an image built from "
            "Dockerfile.triton with the repository baked in",
        )


def repository_url(target: str) -> tuple[str, str]:
    """(scheme, the --model-repository tritonserver reads the target at), or a UsageError for a target the
    stock image cannot read itself."""
    from tritonbuild.core.stores import driver_for, parse_location

    try:
        location = parse_location(target)
    except TritonBuildError as e:
        raise UsageError(f"--target: {e.message}", where=e.where, hint=e.hint) from None
    scheme = {"gcs": "gs", "abfs": "az"}.get(location.scheme, location.scheme)
    if scheme not in SECRET_KEYS:
        raise UsageError(
            f"--target {location}: tritonserver reads a repository from s3://, gs:// or Azure "
            "storage, not from this store; the pods could not start",
            hint="publish to an object store for the pods, or leave --target out to serve the "
            "repository baked into the image",
        )
    url = driver_for(location.scheme).triton_url(location, location.path)
    if url.startswith("as://ACCOUNT/"):
        raise UsageError(
            f"--target {location}: tritonserver names the Azure storage account in its repository "
            "URL (as://ACCOUNT/container/path)",
            hint="set AZURE_STORAGE_ACCOUNT to the account",
        )
    return scheme, url


def startup_budget_s(manifest: Manifest) -> int:
    """Seconds a server may need to load this repository: a base minute plus 60 s per GiB of artifacts
    (an engine is read from disk or the store, deserialised and warmed up)."""
    size = sum(entry.size for entry in manifest.files.values())
    return 60 + math.ceil(size / GIB * 60)


def gpus_per_pod(root: Path, manifest: Manifest) -> int:
    """GPUs one server needs: the most any model's instance groups name (KIND_GPU with gpus [0, 2] needs 3;
    without a list, or a GPU-target model, at least one), what a backend that places its own devices says
    (Backend.gpus_needed), an LLM engine's world size."""
    from tritonbuild.backends import REGISTRY
    from tritonbuild.triton.config import parse

    needed = 0
    for model in manifest.models:
        if model.target == "gpu":
            needed = max(needed, 1)
        world = (model.llm or {}).get("world_size")
        if isinstance(world, int):
            needed = max(needed, world)
        config = root / model.name / "config.pbtxt"
        if not config.is_file():
            continue
        mc = parse(config.read_bytes())
        for group in mc.instance_group:
            if group.kind == group.KIND_GPU:
                needed = max(needed, max(group.gpus) + 1 if group.gpus else 1)
        backend = REGISTRY.for_config(mc.backend, mc.platform)
        if backend is not None:
            needed = max(needed, backend.gpus_needed(mc, root / model.name / str(model.version)))
    return needed


def probe_files(root: Path, manifest: Manifest) -> tuple[dict, dict, list[str]]:
    """(ConfigMap data, ConfigMap binaryData, models whose goldens did not fit): the probe, what it expects,
    and each model's golden while the ConfigMap stays under its limit."""
    models, binary, left_out, used = [], {}, [], 0
    for index, model in enumerate(sorted(manifest.models, key=lambda each: each.name)):
        entry = {"name": model.name, "goldens": {}}
        golden = root / model.goldens if model.goldens else None
        if golden is not None and golden.is_file():
            encoded = base64.b64encode(golden.read_bytes()).decode()
            if used + len(encoded) <= CONFIGMAP_BUDGET:
                key = f"golden-{index}-v{model.version}.npz"  # ConfigMap keys: [-._a-zA-Z0-9]+
                binary[key] = encoded
                entry["goldens"][str(model.version)] = key
                used += len(encoded)
            else:
                left_out.append(model.name)
        models.append(entry)
    script = (Path(__file__).with_name("k8s_probe.py")).read_text()
    return (
        {"probe.py": script, "expect.json": json.dumps({"models": models}, indent=1)},
        binary,
        left_out,
    )


def server_args(target: str | None, control: str, poll_secs: int) -> list[str]:
    """tritonserver's command line in the pod. Strict readiness is off: it would report the whole server
    not-ready while any model loads (a publish reaching every polling pod at once); the probe judges the
    models instead."""
    ports = ["--http-port=8000", "--grpc-port=8001", "--metrics-port=8002"]
    common = ["--strict-readiness=false", "--exit-on-error=false", *ports]
    if target is None:
        return ["--model-repository=/models", "--model-control-mode=none", *common]
    _, url = repository_url(target)
    if control == "poll":
        return [
            f"--model-repository={url}",
            "--model-control-mode=poll",
            f"--repository-poll-secs={poll_secs}",
            *common,
        ]
    return [f"--model-repository={url}", "--model-control-mode=explicit", "--load-model=*", *common]


def launch_needs(manifest: Manifest) -> tuple[dict[str, str], list[str], list[str]]:
    """(environment, launcher prefix, extra tritonserver arguments) the models need at start, read from the
    manifest as the serving image's entrypoint reads it (ci/docker/entrypoint.sh): a TensorRT-LLM orchestrator's
    `mpirun -n 1` and memory pools, a vLLM model's invariant-serving variables. Plugin wheels must be installed
    into the image's Python before the start, which the stock image cannot: refused, with the custom image."""
    env, launcher, extra = {}, [], []
    for model in manifest.models:
        launch = (model.llm or {}).get("server_launch") or {}
        serving = (model.llm or {}).get("serving") or {}
        if serving.get("plugins"):
            raise UsageError(
                f"{model.name}: its plugin wheels ({', '.join(serving['plugins'])}) are installed into "
                "the serving image's Python before tritonserver starts; the stock image cannot",
                hint="build the serving image from Dockerfile.triton (its entrypoint installs them) "
                "and leave --target out, or publish the model without determinism: invariant",
            )
        env |= launch.get("env", {}) | serving.get("env", {})
        launcher = list(launch.get("launcher") or launcher)
        extra += [arg for arg in launch.get("args", []) if arg not in extra]
    return env, launcher, extra


def start(manifest: Manifest, target: str | None, control: str, poll_secs: int) -> dict:
    """The container's command, args and env. The stock image (a target): tritonserver itself, with what the
    models' start needs (launch_needs). The custom image (no target): its entrypoint, which reads the same from
    the baked manifest, told to serve without strict readiness."""
    if target is None:
        return {
            "args": ["--exit-on-error=false"],
            "env": [
                {"name": "TRITON_MODEL_CONTROL", "value": "none"},
                {"name": "TRITONBUILD_STRICT_READINESS", "value": "false"},
            ],
        }
    env, launcher, extra = launch_needs(manifest)
    return {
        "command": [*launcher, "tritonserver"],
        "args": server_args(target, control, poll_secs) + extra,
        "env": [{"name": key, "value": value} for key, value in sorted(env.items())],
    }


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
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "probe", "mountPath": PROBE_FOLDER, "readOnly": True},
        ],
    }


def _credentials(target: str | None, secret: str) -> tuple[dict, list[dict], list[dict]]:
    """(container env fields, extra volumes, extra mounts) that hand tritonserver the Secret's credentials."""
    if target is None:
        return {}, [], []
    scheme, _ = repository_url(target)
    if scheme == "gs":
        return (
            {
                "env": [
                    {
                        "name": "GOOGLE_APPLICATION_CREDENTIALS",
                        "value": f"{GCS_KEY_FOLDER}/key.json",
                    }
                ]
            },
            [{"name": "store-credentials", "secret": {"secretName": secret}}],
            [{"name": "store-credentials", "mountPath": GCS_KEY_FOLDER, "readOnly": True}],
        )
    return {"envFrom": [{"secretRef": {"name": secret}}]}, [], []


def documents(
    root: Path,
    manifest: Manifest,
    *,
    name: str,
    target: str | None,
    replicas: int,
    image: str = STOCK_IMAGE,
    max_replicas: int | None = None,
    control: str = "poll",
    poll_secs: int = 15,
    secret: str | None = None,
    queue_target: int = 8,
) -> tuple[list[dict], list[str]]:
    """(the manifests, models whose goldens the probe could not carry)."""
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "tritonbuild"}
    data, binary, left_out = probe_files(root, manifest)
    secret_env, volumes, mounts = _credentials(target, secret or f"{name}-store")
    container = _container(
        start(manifest, target, control, poll_secs),
        image,
        startup_budget_s(manifest),
        gpus_per_pod(root, manifest),
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
        "containers": [container],
        "terminationGracePeriodSeconds": 60,
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
            {"name": "probe", "configMap": {"name": f"{name}-probe"}},
            *volumes,
        ],
    }
    deploy = {
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
                    "annotations": {"tritonbuild/manifest-sha256": manifest.digest},
                },
                "spec": pod,
            },
        },
    }
    ports = [
        {"name": port["name"], "port": port["containerPort"], "targetPort": port["name"]}
        for port in container["ports"]
    ]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {"selector": labels, "ports": ports},
    }
    out = [config_map, deploy, service]
    if (
        control == "explicit" and target is not None
    ):  # publish --notify must reach every pod, not one of them
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": f"{name}-pods", "labels": labels},
                "spec": {"clusterIP": "None", "selector": labels, "ports": ports},
            }
        )
    return out + _scaling(
        name, labels, replicas, max_replicas or replicas * 3, queue_target
    ), left_out


def _scaling(
    name: str, labels: dict, replicas: int, max_replicas: int, queue_target: int
) -> list[dict]:
    """An autoscaler on the requests waiting in Triton's queues (per pod, through a custom-metrics adapter
    such as prometheus-adapter scraping port 'metrics'), and a disruption budget that keeps a ready pod."""
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
    budget = {"minAvailable": 1} if replicas <= 2 else {"maxUnavailable": 1}
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "labels": labels},
        "spec": {**budget, "selector": {"matchLabels": labels}},
    }
    return [hpa, pdb]


def render(docs: list[dict]) -> str:
    return yaml.dump_all(docs, Dumper=NoAliasDumper, sort_keys=False, allow_unicode=True)


def write(root: Path, manifest: Manifest, out: Path, **options) -> tuple[Path, int, list[str]]:
    """Check the options, then write OUT/NAME.yaml: (its path, the startup budget in seconds, models whose
    goldens the probe leaves out)."""
    check_options(**options)
    docs, left_out = documents(root, manifest, **options)
    text = render(docs)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{options['name']}.yaml"
    path.write_text(text)
    return path, startup_budget_s(manifest), left_out
