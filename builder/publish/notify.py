"""Telling tritonservers in explicit model-control mode what was published: which models they do not have
READY, and the load request itself (tritonclient's HTTP client; user:password@ in a URL becomes Basic auth)."""

from __future__ import annotations

from tritonbuild.core.secrets import redact


def _client_for(url: str, timeout: float):
    """A tritonclient HTTP client for url, and the Basic Authorization its user:password@ asks for."""
    import base64
    from urllib.parse import unquote, urlsplit

    from tritonclient.http import InferenceServerClient

    parts = urlsplit(url if "://" in url else f"http://{url}")
    headers = {}
    if parts.username is not None:
        cred = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(cred).decode()
    host = parts.netloc.rsplit("@", 1)[-1] + parts.path.rstrip("/")
    return InferenceServerClient(host, ssl=parts.scheme == "https", connection_timeout=10.0,
                                 network_timeout=timeout), headers


def not_ready_on(url: str, models: list[str], timeout: float = 30.0) -> set[str]:
    """The published models the server at url does not have READY (absent from its repository index, or
    UNAVAILABLE after a failed load): an unchanged config does not mean the server serves it. A server whose
    index cannot be read gives the empty set (the load requests for changed models then report the problem)."""
    try:
        client, headers = _client_for(url, timeout)
        try:
            index = client.get_model_repository_index(headers=headers or None)
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - unreachable or refused: the per-model notify reports it
        return set()
    ready = {e.get("name") for e in index or [] if e.get("state") == "READY"}
    return {name for name in models if name not in ready}


def notify_server(url: str, model: str, timeout: float = 300.0) -> dict:
    """Ask a tritonserver in explicit model-control mode to (re)load model, through tritonclient's HTTP client.
    user:password@ in the URL becomes a Basic Authorization header; what we report shows the URL redacted."""
    from urllib.parse import urlsplit

    from tritonclient.utils import InferenceServerException

    parts = urlsplit(url if "://" in url else f"http://{url}")
    shown = redact(f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/"))
    result = {"server": shown, "model": model}
    try:
        client, headers = _client_for(url, timeout)
        try:
            client.load_model(model, headers=headers or None)
        finally:
            client.close()
        return {**result, "ok": True, "status": 200, "message": "loaded"}
    except InferenceServerException as e:
        status = e.status()
        return {**result, "ok": False, "status": int(status) if str(status).isdigit() else None,
                "message": redact(e.message() or str(e))[:500]}
    except Exception as e:  # noqa: BLE001 - refused, unreachable, timed out: reported per server, never raised
        return {**result, "ok": False, "status": None, "message": redact(f"{type(e).__name__}: {e}")[:500]}
