"""What tritonserver in a pod is given (publish/k8s.py writes it into the manifests): the URL it
reads a publish target at, its command line and what the models need at its start, the GPUs and the
startup time one server needs, and the readiness probe's files with the goldens that fit the
ConfigMap.

Facts (tests/contracts/facts/kubernetes.json): tritonserver's flags (server
src/command_line_parser.cc), strict readiness counting every model (core src/server.cc
InferenceServer::IsReady).
"""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

from tritonbuild.core.drivers import Driver
from tritonbuild.errors import TritonBuildError, UsageError
from tritonbuild.repository.manifest import Manifest

GIB = 1 << 30
CONFIGMAP_BUDGET = (
    900 * 1024
)  # a ConfigMap holds at most 1 MiB; goldens past this stay out of the probe


def repository_url(target: str, endpoint: str | None = None) -> tuple[Driver, str]:
    """(the target's store driver, the --model-repository tritonserver reads the target at), or a
    UsageError for a target the stock image cannot read itself (its driver names no triton_scheme).
    An endpoint comes from --endpoint-url (the one the cluster reaches the store at, taken as
    given), else from this machine's environment (the driver's endpoint_env): one on this machine's
    loopback would send every pod to its own, and is refused."""
    from tritonbuild.core.stores import driver_for, parse_location, served_drivers

    try:
        location = parse_location(target, endpoint)
    except TritonBuildError as e:
        raise UsageError(f"--target: {e.message}", where=e.where, hint=e.hint) from None
    driver = driver_for(location.scheme)
    if not driver.triton_scheme:
        *others, last = [f"{d.schemes[0]}://" for d in served_drivers()] or ["no store"]
        readable = f"{', '.join(others)} or {last}" if others else last
        raise UsageError(
            f"--target {location}: tritonserver reads a repository from {readable}, not from "
            "this store; the pods could not start",
            hint="publish to an object store for the pods, or leave --target out to serve the "
            "repository baked into the image",
        )
    if location.endpoint and not endpoint and _loopback(location.endpoint):
        source = driver.endpoint_source()
        raise UsageError(
            f"{source}={location.endpoint} is this machine's own address; written into "
            "the pods' repository URL, each pod would look for the store on itself",
            hint="give the endpoint the cluster reaches the store at with --endpoint-url (e.g. "
            f"http://minio.storage.svc:9000), or unset {source} for {driver.name}'s own endpoint",
        )
    problem = driver.serving_problem(location)
    if problem:
        raise UsageError(f"--target {location}: {problem[0]}", hint=problem[1])
    return driver, driver.triton_url(location, location.path)


def _loopback(url: str) -> bool:
    """An endpoint on the machine it is read on: localhost, 127.0.0.0/8, ::1, 0.0.0.0."""
    import ipaddress
    from urllib.parse import urlsplit

    from tritonbuild.core.stores import with_scheme

    host = (urlsplit(with_scheme(url)).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def startup_budget_s(manifest: Manifest) -> int:
    """Seconds a server may need to load this repository: a base minute plus 60 s per GiB of
    artifacts (an engine is read from disk or the store, deserialised and warmed up)."""
    size = sum(entry.size for entry in manifest.files.values())
    return 60 + math.ceil(size / GIB * 60)


def gpus_per_pod(root: Path, manifest: Manifest) -> int:
    """GPUs one server needs: the most any model's instance groups name (KIND_GPU with gpus [0, 2]
    needs 3; without a list, or a GPU-target model, at least one), what a backend that places its
    own devices says (Backend.gpus_needed), an LLM engine's world size."""
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
    """(ConfigMap data, ConfigMap binaryData, models whose goldens did not fit): the probe, what it
    expects, and each model's golden while the ConfigMap stays under its limit."""
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
    script = (Path(__file__).with_name("probe.py")).read_text()
    return (
        {"probe.py": script, "expect.json": json.dumps({"models": models}, indent=1)},
        binary,
        left_out,
    )


def server_args(
    target: str | None, control: str, poll_secs: int, endpoint: str | None = None
) -> list[str]:
    """tritonserver's command line in the pod. Strict readiness is off: it would report the whole
    server not-ready while any model loads (a publish reaching every polling pod at once); the probe
    judges the models instead."""
    ports = ["--http-port=8000", "--grpc-port=8001", "--metrics-port=8002"]
    common = ["--strict-readiness=false", "--exit-on-error=false", *ports]
    if target is None:
        return ["--model-repository=/models", "--model-control-mode=none", *common]
    _, url = repository_url(target, endpoint)
    if control == "poll":
        return [
            f"--model-repository={url}",
            "--model-control-mode=poll",
            f"--repository-poll-secs={poll_secs}",
            *common,
        ]
    return [f"--model-repository={url}", "--model-control-mode=explicit", "--load-model=*", *common]


def launch_needs(manifest: Manifest) -> tuple[dict[str, str], list[str], list[str]]:
    """(environment, launcher prefix, extra tritonserver arguments) the models need at start, read
    from the manifest as the serving image's entrypoint reads it (ci/docker/entrypoint.sh): a
    TensorRT-LLM orchestrator's `mpirun -n 1` and memory pools, a vLLM model's invariant-serving
    variables. Plugin wheels must be installed into the image's Python before the start, which the
    stock image cannot: refused, with the custom image."""
    env, launcher, extra = {}, [], []
    for model in manifest.models:
        launch = (model.llm or {}).get("server_launch") or {}
        serving = (model.llm or {}).get("serving") or {}
        if serving.get("plugins"):
            raise UsageError(
                f"{model.name}: its plugin wheels ({', '.join(serving['plugins'])}) are installed "
                "into the serving image's Python before tritonserver starts; the stock image "
                "cannot",
                hint="build the serving image from Dockerfile.triton (its entrypoint installs "
                "them) and leave --target out, or publish the model without determinism: "
                "invariant",
            )
        env |= (
            launch.get("env", {}) | serving.get("env", {}) | (model.numerics or {}).get("env", {})
        )
        launcher = list(launch.get("launcher") or launcher)
        extra += [arg for arg in launch.get("args", []) if arg not in extra]
    return env, launcher, extra


def check_plugin_builds(root: Path, manifest: Manifest) -> None:
    """Refuse models that ship different builds of one plugin distribution: the serving image's
    entrypoint installs each distinct wheel once into one Python, and refuses (exit 2, a pod in
    CrashLoopBackOff) two builds that could not both be served as verified."""
    import hashlib

    builds: dict[str, dict[str, str]] = {}  # distribution -> {sha256: "model ships version"}
    for model in manifest.models:
        for rel in ((model.llm or {}).get("serving") or {}).get("plugins", []):
            path = root / model.name / str(model.version) / rel
            dist, version = Path(rel).name.split("-")[:2]  # PEP 427: {distribution}-{version}-...
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else rel
            builds.setdefault(dist.replace("-", "_").lower(), {}).setdefault(
                digest, f"{model.name} ships {version}"
            )
    for dist, shipped in sorted(builds.items()):
        if len(shipped) > 1:
            raise UsageError(
                f"the models ship different builds of the plugin {dist} "
                f"({'; '.join(shipped.values())}): the serving image installs one into its "
                "Python, and each model was verified with its own; its entrypoint refuses to start",
                hint="rebuild the models with one tritonbuild (they then ship the same wheel), or "
                "serve them from separate images",
            )


def start(
    manifest: Manifest,
    target: str | None,
    control: str,
    poll_secs: int,
    endpoint: str | None = None,
) -> dict:
    """The container's command, args and env. The stock image (a target): tritonserver itself, with
    what the models' start needs (launch_needs). The custom image (no target): its entrypoint, which
    reads the same from the baked manifest, told to serve without strict readiness."""
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
        "args": server_args(target, control, poll_secs, endpoint) + extra,
        "env": [{"name": key, "value": value} for key, value in sorted(env.items())],
    }


# The packages the stock image gives Python models (build.py installs python3 and numpy < 2 for the
# Python backend: tests/contracts/facts/kubernetes.json, stock_image_python)
REQUIREMENTS_FILE = "requirements-models.txt"


def model_imports(root: Path, image: str) -> tuple[str, ...]:
    """What the repository's Python files import beyond the standard library and numpy, pinned at
    the versions installed here (what verify ran them with: server/mirror.py), for the image's
    Python where it is recorded (else this one's)."""
    import sys

    from tritonbuild.server.mirror import mirror_of
    from tritonbuild.triton.images import image_python

    found = image_python(image)
    minor = found[1] if found else f"{sys.version_info[0]}.{sys.version_info[1]}"
    return mirror_of([root], minor).requirements


def write_requirements(out: Path, image: str, requirements: tuple[str, ...]) -> Path | None:
    """OUT/requirements-models.txt for building an image FROM this one with what the models import;
    None (and an earlier one removed) when they import nothing it lacks."""
    path = out / REQUIREMENTS_FILE
    if not requirements:
        path.unlink(missing_ok=True)
        return None
    head = (
        f"# What the models' Python files import beyond the standard library and numpy, at the\n"
        f"# versions tritonbuild verified them with; {image} does not ship them.\n"
        f"#   FROM {image}\n#   COPY {REQUIREMENTS_FILE} /tmp/\n"
        f"#   RUN pip install --no-cache-dir -r /tmp/{REQUIREMENTS_FILE}\n"
    )
    if any("+" in each.split("==", 1)[-1] for each in requirements):
        head += "# A local version (+cpu, +cu121) is the build installed here: name the one your GPUs need.\n"
    path.write_text(head + "\n".join(requirements) + "\n")
    return path
