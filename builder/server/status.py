"""A running tritonserver at a glance: health, server version, the models of its repository index with their
state and versions, each ready model's config (backend, batching, tensors, instances) and its inference counters
from the metrics endpoint. Read-only: Triton's HTTP API (KServe v2 + repository extension) and Prometheus text."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from tritonbuild.core.secrets import redact
from tritonbuild.core.stores import with_scheme
from tritonbuild.errors import ServerError

TIMEOUT_S = 10.0
# nv_inference_request_success{model="m",version="1"} 12
_METRIC_RE = re.compile(r'^(nv_inference_(?:request_success|request_failure|count|exec_count))\{([^}]*)\}\s+(\S+)')


def _request(url: str, method: str = "GET", body: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method=method,
                                     headers={"Content-Type": "application/json"} if body is not None else {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _tensors(items: list[dict]) -> list[str]:
    return [f"{t.get('name')} {t.get('data_type', '').removeprefix('TYPE_')} {t.get('dims', [])}" for t in items]


def _config_summary(config: dict) -> dict:
    return {"backend": config.get("backend") or config.get("platform") or "",
            "max_batch_size": int(config.get("max_batch_size", 0)),
            "dynamic_batching": "dynamic_batching" in config,
            "decoupled": bool((config.get("model_transaction_policy") or {}).get("decoupled")),
            "inputs": _tensors(config.get("input", [])), "outputs": _tensors(config.get("output", [])),
            "instances": [f"{g.get('count', 1)}x {g.get('kind', 'KIND_AUTO').removeprefix('KIND_')}"
                          for g in config.get("instance_group", [])]}


def _metrics(metrics_url: str | None) -> tuple[dict[str, dict[str, float]], str | None]:
    """model → counter → value (summed over versions), or why the endpoint could not be read."""
    if not metrics_url:
        return {}, None
    try:
        code, body = _request(metrics_url)
    except (urllib.error.URLError, OSError) as e:
        return {}, f"metrics {redact(metrics_url)} not reachable ({e})"
    if code != 200:
        return {}, f"metrics {redact(metrics_url)} answered HTTP {code}"
    out: dict[str, dict[str, float]] = {}
    for line in body.decode(errors="replace").splitlines():
        match = _METRIC_RE.match(line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
            counters = out.setdefault(labels.get("model", "?"), {})
            counters[match.group(1)] = counters.get(match.group(1), 0.0) + float(match.group(3))
    return out, None


def server_status(url: str, metrics_url: str | None = None) -> dict:
    """Everything `tritonbuild status URL` shows. metrics_url defaults to the HTTP host on port 8002."""
    base = with_scheme(url.rstrip("/"))
    shown = redact(base)
    try:
        live = _request(f"{base}/v2/health/live")[0] == 200
    except (urllib.error.URLError, OSError) as e:
        raise ServerError(f"cannot reach tritonserver at {shown}: {getattr(e, 'reason', e)}", where=shown,
                          hint="is it running? (tritonbuild serve DIR starts one on :8000)") from None
    ready = _request(f"{base}/v2/health/ready")[0] == 200
    code, body = _request(base + "/v2")
    server = json.loads(body) if code == 200 else {}
    code, body = _request(f"{base}/v2/repository/index", "POST", b"{}")
    index = json.loads(body) if code == 200 else None
    models = []
    for entry in index or []:
        name, state = entry.get("name", ""), entry.get("state") or "not loaded"
        row = {"name": name, "version": entry.get("version"), "state": state, "reason": entry.get("reason") or ""}
        if state == "READY":
            code, body = _request(f"{base}/v2/models/{name}/config")
            if code == 200:
                row["config"] = _config_summary(json.loads(body))
        models.append(row)
    parts = urlsplit(base)
    metrics_url = metrics_url or f"{parts.scheme}://{parts.hostname}:8002/metrics"
    counters, metrics_note = _metrics(metrics_url)
    for row in models:
        row["metrics"] = counters.get(row["name"], {})
    notes = [] if index is not None else ["repository index not readable (the server does not expose the "
                                          "model-repository extension to this client)"]
    if metrics_note:
        notes.append(metrics_note)
    return {"server": shown, "live": live, "ready": ready, "version": server.get("version"),
            "extensions": server.get("extensions", []), "models": models, "metrics": redact(metrics_url),
            "notes": notes}
