"""A running tritonserver at a glance: health, server version, the models of its repository index with their
state and versions, each ready model's config (backend, batching, tensors, instances) and its inference counters
from the metrics endpoint. Read-only: Triton's HTTP API (KServe v2 + repository extension) and Prometheus text."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from tritonbuild.core.results import OMIT_NONE, Result
from tritonbuild.core.secrets import redact
from tritonbuild.core.stores import with_scheme
from tritonbuild.errors import ServerError
from tritonbuild.triton.client import Server
from tritonbuild.triton.plain_http import ErrorAnswer, get_text

TIMEOUT_S = 10.0
# Triton's per-model counters (nv_inference_request_success{model="m",version="1"} 12), read with
# prometheus_client's parser: a model name holding a quote or a backslash comes escaped in the label
COUNTERS = (
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "nv_inference_count",
    "nv_inference_exec_count",
)


@dataclass
class ModelStatus(Result):
    """One entry of the server's repository index; config: a ready model's config summary."""

    name: str
    version: str | None
    state: str
    reason: str
    config: dict | None = field(default=None, metadata=OMIT_NONE)
    metrics: dict[str, float] | None = None  # counter → value, summed over versions


@dataclass(frozen=True)
class ServerStatus(Result):
    """`tritonbuild status URL`: health, version, extensions, models, the metrics URL read, notes."""

    server: str
    live: bool
    ready: bool
    version: str | None
    extensions: list[str]
    models: list[ModelStatus]
    metrics: str
    notes: list[str]


def _tensors(items: list[dict]) -> list[str]:
    return [
        f"{t.get('name')} {t.get('data_type', '').removeprefix('TYPE_')} {t.get('dims', [])}"
        for t in items
    ]


def _config_summary(config: dict) -> dict:
    return {
        "backend": config.get("backend") or config.get("platform") or "",
        "max_batch_size": int(config.get("max_batch_size", 0)),
        "dynamic_batching": "dynamic_batching" in config,
        "decoupled": bool((config.get("model_transaction_policy") or {}).get("decoupled")),
        "inputs": _tensors(config.get("input", [])),
        "outputs": _tensors(config.get("output", [])),
        "instances": [
            f"{g.get('count', 1)}x {g.get('kind', 'KIND_AUTO').removeprefix('KIND_')}"
            for g in config.get("instance_group", [])
        ],
    }


def _metrics(metrics_url: str | None) -> tuple[dict[str, dict[str, float]], str | None]:
    """model → counter → value (summed over versions), or why the endpoint could not be read."""
    if not metrics_url:
        return {}, None
    try:
        text = get_text(metrics_url, TIMEOUT_S)
    except ErrorAnswer as e:
        return {}, f"metrics {redact(metrics_url)} answered HTTP {e.status}"
    except OSError as e:
        return {}, f"metrics {redact(metrics_url)} not reachable ({e})"
    return counters_by_model(text), None


def counters_by_model(text: str) -> dict[str, dict[str, float]]:
    """Prometheus text → model → counter → value, summed over versions (Triton's COUNTERS only)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name not in COUNTERS:
            continue
        for sample in family.samples:  # NOTE: the parser names a counter's samples NAME_total
            if sample.name in (family.name, f"{family.name}_total"):
                counters = out.setdefault(sample.labels.get("model", "?"), {})
                counters[family.name] = counters.get(family.name, 0.0) + float(sample.value)
    return out


def _asked(call, otherwise):
    """call()'s answer, or otherwise when the server answered it with an error (or not at all)."""
    try:
        return call()
    except Exception:  # noqa: BLE001 - shown as not ready / not readable, as Triton's HTTP API would say
        return otherwise


def _model_row(server: Server, entry: dict) -> ModelStatus:
    name, state = entry.get("name", ""), entry.get("state") or "not loaded"
    config = _asked(lambda: server.model_config(name), None) if state == "READY" else None
    return ModelStatus(
        name=name,
        version=entry.get("version"),
        state=state,
        reason=entry.get("reason") or "",
        config=_config_summary(config) if config is not None else None,
    )


def server_status(url: str, metrics_url: str | None = None) -> ServerStatus:
    """Everything `tritonbuild status URL` shows. metrics_url defaults to the HTTP host on port 8002."""
    base = with_scheme(url.rstrip("/"))
    shown = redact(base)
    with Server(base, TIMEOUT_S) as server:
        try:
            live = server.live()
        except Exception as e:  # noqa: BLE001 - refused, unreachable, timed out
            raise ServerError(
                f"cannot reach tritonserver at {shown}: {getattr(e, 'reason', e)}",
                where=shown,
                hint="is it running? (tritonbuild serve DIR starts one on :8000)",
            ) from None
        ready, server_info, index = (
            _asked(server.ready, False),
            _asked(server.metadata, {}),
            _asked(server.index, None),
        )
        models = [_model_row(server, entry) for entry in index or []]
    parts = urlsplit(base)
    metrics_url = metrics_url or f"{parts.scheme}://{parts.hostname}:8002/metrics"
    counters, metrics_note = _metrics(metrics_url)
    for row in models:
        row.metrics = counters.get(row.name, {})
    notes = (
        []
        if index is not None
        else [
            "repository index not readable (the server does not expose the "
            "model-repository extension to this client)"
        ]
    )
    if metrics_note:
        notes.append(metrics_note)
    return ServerStatus(
        server=shown,
        live=live,
        ready=ready,
        version=server_info.get("version"),
        extensions=server_info.get("extensions", []),
        models=models,
        metrics=redact(metrics_url),
        notes=notes,
    )
