"""How verify runs each model of a manifest: live in the embedded tritonserver, live on a given
server, in-process, or not here (and why), and the runner that asks a live model."""

from __future__ import annotations

from tritonbuild.backends import REGISTRY, runs_embedded
from tritonbuild.backends.base import Route
from tritonbuild.core.secrets import redact
from tritonbuild.repository.manifest import Manifest, ManifestModel
from tritonbuild.verify.runners import TritonRunner


def route_for(
    model: ManifestModel,
    server_url: str | None,
    manifest: Manifest | None = None,
    _seen: frozenset[str] = frozenset(),
    given: frozenset[str] = frozenset(),
) -> tuple[Route, str]:
    """How verify runs this model (live-embedded, live-server, in-process, or none) and what runs
    it. given: the backends handed to the embedded server (verify --backend), whose models it
    runs."""
    toolchain = REGISTRY.toolchain()  # the backends' tools too (route_detail names them)
    if server_url:
        return "live-server", f"tritonserver at {redact(server_url)}"
    if model.backend in given:
        version = toolchain.get("tritonserver", "?")
        return "live-embedded", f"tritonserver {version} embedded, {model.backend} backend given"
    if model.name in _seen:
        return (
            "none",
            f"not run: {model.name!r} depends on itself through {sorted(_seen)} (a cycle Triton "
            "refuses)",
        )
    if model.depends_on and manifest is not None:
        names = {other.name for other in manifest.models}
        blocked = [
            dependency
            for dependency in model.depends_on
            if dependency not in names
            or route_for(manifest.model(dependency), None, manifest, _seen | {model.name})[0]
            != "live-embedded"
        ]
        if blocked:
            return (
                "none",
                f"not run here: calls {blocked}, which the embedded server cannot load (--server "
                "URL)",
            )
    if model.target == "gpu" and not (
        toolchain.get("gpu_name") and runs_embedded(model.backend) and not model.llm
    ):
        return (
            "none",
            f"not run here: needs a GPU server with the {model.backend} backend (verify --server "
            "URL)",
        )
    if runs_embedded(model.backend):
        gpu = f", {toolchain['gpu_name']}" if model.target == "gpu" else ""
        return "live-embedded", f"tritonserver {toolchain.get('tritonserver', '?')} embedded{gpu}"
    backend = REGISTRY.for_manifest(model.backend)
    if backend is not None and backend.route == "in-process":
        return "in-process", backend.route_detail(toolchain)
    return "none", f"no way to run backend {model.backend} here"


def live_runner(url: str, model: ManifestModel):
    """HTTP infer, or Triton's generate endpoints for a backend whose models answer decoupled
    (vLLM)."""
    backend = REGISTRY.for_manifest(model.backend)
    if backend is not None and backend.live_protocol == "generate":
        from tritonbuild.verify.generate import GenerateRunner

        return GenerateRunner(url, model)
    return TritonRunner(url, model)
