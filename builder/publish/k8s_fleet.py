"""What a fleet needs of the pods beyond one server's start (publish/k8s.py puts it into the
Deployment): the securityContext, GPU scheduling (the device plugin's resource, the toleration of
GPU nodes' taint, the node selection from the GPU the models were planned for) and a disruption
budget that never blocks a node drain.

Facts (tests/contracts/facts/kubernetes.json): the stock image's non-root user (server build.py),
the toleration Kubernetes itself gives a pod asking for an extended resource (admission plugin
ExtendedResourceToleration), GPU feature discovery's node labels (NVIDIA gpu-feature-discovery),
the disruption controller's rule (kubernetes pkg/controller/disruption).
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonbuild.errors import UsageError
from tritonbuild.repository.manifest import Manifest
from tritonbuild.triton.images import default_image

STOCK_IMAGE = default_image("py3")

NONROOT_ID = 1000  # the stock image's triton-server user and group
GPU_RESOURCE = "nvidia.com/gpu"  # the NVIDIA device plugin's resource
GFD_LABEL = "nvidia.com/gpu"  # GPU feature discovery's label prefix: .compute.major, .memory, ...
# GFD labels a node with NVML's memory total (MiB); nvidia-smi's figures (GPU_MEMORY_MIB) are a few
# hundred MiB lower on some boards: a node qualifies above this share of the planned GPU's memory
MEMORY_SHARE = 0.95
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "privileged": False,
    "capabilities": {"drop": ["ALL"]},
}


@dataclass(frozen=True)
class DeployOptions:
    """What deploy-snippets writes the manifests for (its options; api.deploy_snippets' keywords),
    checked by publish/k8s.py:check_options before anything is written."""

    name: str = "tritonserver"  # the Deployment's and Service's name (a DNS label)
    image: str = STOCK_IMAGE  # the serving image: the stock one, or one with the models baked in
    target: str | None = None  # the publish target the pods read (None: the image's /models)
    endpoint: str | None = None  # the S3 endpoint the pods reach target at
    gpu_node_selector: dict[str, str] | None = None  # None: GPU feature discovery's labels
    control: str = "poll"  # 'poll' follows each publish; 'explicit' loads on publish --notify
    poll_secs: int = 15  # how often a polling tritonserver re-reads target
    secret: str | None = None  # the Secret holding the store's credentials (None: NAME-store)
    replicas: int = 1  # pods, and the autoscaler's minimum
    max_replicas: int | None = None  # the autoscaler's maximum (None: 3 × replicas)
    queue_target: int = 8  # requests waiting per pod the autoscaler aims at


def root_needed(manifest: Manifest, target: str | None) -> str | None:
    """Why the container must run as root, or None: the custom image's entrypoint pip-installs
    models' plugin wheels into the image's Python (owned by root) before tritonserver starts."""
    if target is not None:
        return None
    for model in manifest.models:
        if ((model.llm or {}).get("serving") or {}).get("plugins"):
            return (
                f"{model.name}'s plugin wheels are pip-installed into the image's Python at start"
            )
    return None


def pod_security(root_reason: str | None) -> dict:
    """The pod's securityContext: the stock image's non-root user where nothing needs root; the
    runtime's default seccomp profile either way."""
    seccomp = {"seccompProfile": {"type": "RuntimeDefault"}}
    if root_reason is not None:
        return seccomp
    return {
        "runAsNonRoot": True,
        "runAsUser": NONROOT_ID,
        "runAsGroup": NONROOT_ID,
        "fsGroup": NONROOT_ID,
        **seccomp,
    }


def planned_gpus(manifest: Manifest) -> dict[str, str]:
    """model → the GPU its build was planned for (an LLM recipe's `gpu:`, recorded in its manifest
    entry: vLLM's `llm.gpu`, TensorRT-LLM's memory plan)."""
    out = {}
    for model in manifest.models:
        llm = model.llm or {}
        gpu = llm.get("gpu") or (llm.get("memory_plan") or {}).get("gpu")
        if isinstance(gpu, str):
            out[model.name] = gpu
    return out


def gpu_scheduling(manifest: Manifest, gpus: int, node_selector: dict[str, str] | None) -> dict:
    """Pod spec fields for a pod that asks for GPUs: the toleration of the nodes' GPU taint, and the
    nodes it may run on: --gpu-node-selector as given, else GPU feature discovery's labels for the
    compute capability and memory of the GPU the models were planned for."""
    if not gpus:
        return {"nodeSelector": node_selector} if node_selector else {}
    out: dict = {
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    }
    if node_selector:
        return {**out, "nodeSelector": node_selector}
    planned = planned_gpus(manifest)
    if len(set(planned.values())) > 1:
        shown = ", ".join(f"{name}: {gpu}" for name, gpu in sorted(planned.items()))
        raise UsageError(
            f"the models were planned for different GPUs ({shown}), and one pod runs them all",
            hint="build them for one GPU (the recipes' gpu:), or say which nodes to use with "
            "--gpu-node-selector KEY=VALUE",
        )
    if planned:
        (gpu,) = set(planned.values())
        out["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": gpu_node_terms(gpu)}]
                }
            }
        }
    return out


def gpu_node_terms(gpu: str) -> list[dict]:
    """Node labels (GPU feature discovery's) of a node with that GPU's compute capability and at
    least its memory."""
    from tritonbuild.backends.llm.gpus import GPU_MEMORY_MIB, GPU_SM

    major, minor = f"{GPU_SM[gpu]:.1f}".split(".")
    return [
        {"key": f"{GFD_LABEL}.compute.major", "operator": "In", "values": [major]},
        {"key": f"{GFD_LABEL}.compute.minor", "operator": "In", "values": [minor]},
        {
            "key": f"{GFD_LABEL}.memory",
            "operator": "Gt",
            "values": [str(int(GPU_MEMORY_MIB[gpu] * MEMORY_SHARE))],
        },
    ]


def node_selector(pairs: tuple[str, ...]) -> dict[str, str] | None:
    """--gpu-node-selector KEY=VALUE, repeated, as a nodeSelector."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(
                f"--gpu-node-selector {pair!r}: expected KEY=VALUE (a node label)",
                hint="e.g. --gpu-node-selector cloud.google.com/gke-accelerator=nvidia-h100-80gb",
            )
        out[key] = value
    return out or None


def disruption_budget() -> dict:
    """At most one pod evicted at a time: the disruption controller allows (ready pods − (expected −
    maxUnavailable)) evictions, so a healthy Deployment always allows one and a drain proceeds, one
    pod at a time; with one replica that takes the only pod down (said at generation).
    minAvailable 1 on one replica allowed none: kubectl drain waited forever."""
    return {"maxUnavailable": 1}


def lifecycle_header(name: str, digest: str) -> str:
    """The YAML's first lines: which build it was written for, and that the probe's goldens follow
    the repository (the ConfigMap's lifecycle)."""
    return (
        f"# Written by tritonbuild deploy-snippets for the repository whose manifest is {digest}.\n"
        f"# {configmap_lifecycle(name)}\n"
    )


def configmap_lifecycle(name: str) -> str:
    return (
        f"The ConfigMap {name}-probe holds the goldens of the versions built now: after each "
        "publish that changes a model, run deploy-snippets again on the published repository and "
        "kubectl apply it (until then the probe checks the new versions for readiness only, "
        "without a golden)"
    )


def fleet_notes(root, manifest: Manifest, options: DeployOptions) -> list[str]:
    """What the operator must know of the manifests: the ConfigMap's lifecycle, the endpoint the
    pods read the store at, a drain with one replica, a pod that runs as root, the GPU nodes."""
    from tritonbuild.publish.k8s_pod import gpus_per_pod, repository_url

    name, target, endpoint = options.name, options.target, options.endpoint
    notes = [configmap_lifecycle(name)]
    if target is not None:
        driver, url = repository_url(target, endpoint)
        if driver.endpoint(endpoint):
            where = "--endpoint-url" if endpoint else driver.endpoint_source()
            notes.append(f"the pods read {url} (the {driver.name} endpoint from {where})")
    if options.replicas == 1:
        notes.append(
            "--replicas 1: a node drain evicts the only pod (the disruption budget allows one; "
            "minAvailable 1 would block the drain), and the models are unavailable until its "
            "replacement is ready; --replicas 2 keeps one serving"
        )
    reason = root_needed(manifest, target)
    if reason:
        notes.append(
            f"the pods run as root ({reason}), without privilege escalation, every capability "
            "dropped"
        )
    gpus = gpus_per_pod(root, manifest)
    if gpus:
        chosen = options.gpu_node_selector
        planned = sorted(set(planned_gpus(manifest).values()))
        where = (
            f"on nodes labelled {', '.join(f'{k}={v}' for k, v in chosen.items())}"
            if chosen
            else f"on nodes GPU feature discovery labels as {planned[0]}-class (compute "
            "capability and memory; --gpu-node-selector KEY=VALUE chooses others)"
            if planned
            else "on any node with free GPUs (--gpu-node-selector KEY=VALUE narrows it)"
        )
        notes.append(
            f"each pod asks for {gpus} {GPU_RESOURCE} and tolerates GPU nodes' taint, {where}"
        )
    return notes
