"""Telling tritonservers in explicit model-control mode what was published: which models they do not have
READY, and the load request itself (tritonclient's HTTP client; user:password@ in a URL becomes Basic auth)."""

from __future__ import annotations

import os

from tritonbuild.core.secrets import redact
from tritonbuild.core.stores import with_scheme
from tritonbuild.triton.client import Server, refused

LOAD_TIMEOUT_ENV = "TRITONBUILD_NOTIFY_LOAD_TIMEOUT_S"
DEFAULT_LOAD_TIMEOUT_S = 300.0


def load_timeout() -> float:
    """How long a load request may take: the server answers only once the model is loaded (minutes for a
    large one), so this is longer than the network deadline; the index request before it is not."""
    try:
        value = float(os.environ.get(LOAD_TIMEOUT_ENV, DEFAULT_LOAD_TIMEOUT_S))
    except ValueError:
        value = DEFAULT_LOAD_TIMEOUT_S
    return value if value > 0 else DEFAULT_LOAD_TIMEOUT_S


def repository_index(url: str) -> tuple[dict[str, str] | None, str | None]:
    """(model → state in the server's repository index, None) or (None, why it could not be asked); a model its
    repository holds but it never loaded has state '' (Triton lists those without one). The index request
    waits at most the network deadline, so a server that never answers is found in that time and is sent no
    load request."""
    from tritonbuild.core.objstore import deadline, deadline_words, within_deadline

    def ask():
        with Server(url, deadline()) as server:
            return server.index()

    try:
        index = within_deadline(ask, "the repository index request")
    except Exception as e:  # noqa: BLE001 - silent or unreachable: reported per model, never raised
        if not _no_answer(e):
            return {}, None  # it answered, with an error: the load requests report what it says
        text = redact(f"{type(e).__name__}: {e}")[:400]
        return None, text if "network deadline" in text else f"no answer within {deadline_words()}: {text}"
    return {e["name"]: e.get("state") or "" for e in index or [] if isinstance(e, dict) and e.get("name")}, None


def _no_answer(e: BaseException) -> bool:
    """The server never answered (timed out, refused or unreachable), as opposed to answering an error."""
    from tritonbuild.core.objstore import classify

    return classify(e) == "network" or "timeout" in type(e).__name__.lower() or "timed out" in str(e).lower()


def notify_all(urls: tuple[str, ...], changed: set[str], published: list[str]) -> list[dict]:
    """Per server: load each model whose config.pbtxt changed and each published one it does not have READY
    (absent, or UNAVAILABLE after a failed load); a server that does not answer its index is reported once
    per changed model, with no load request sent. In a mixed fleet a server is asked only for the models it
    serves (its index shows a state for them: loaded, loading, or a failed load); a model no notified server
    serves yet (new, or every server restarted) is asked of every server; one left out is reported as skipped,
    with the servers that serve it."""
    indexes = {url: repository_index(url) for url in urls}
    served = {url: {name for name, state in (states or {}).items() if state} for url, (states, _) in indexes.items()}
    out = []
    for url in urls:
        states, why = indexes[url]
        if states is None:
            shown = _shown(url)
            out += [{"server": shown, "model": name, "ok": False, "status": None, "message": why}
                    for name in sorted(changed or set(published))]
            continue
        for name in sorted(changed | {name for name in published if states.get(name) != "READY"}):
            serving = [other for other in urls if name in served[other]]
            if serving and url not in serving:
                out.append({"server": _shown(url), "model": name, "ok": True, "status": None, "skipped": True,
                            "message": f"not asked: this server does not serve {name!r} (its repository index "
                                       f"shows no load of it); served by {', '.join(map(_shown, serving))}"})
            else:
                out.append(notify_server(url, name))
    return out


def _shown(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(with_scheme(url))
    return redact(f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/"))


def notify_server(url: str, model: str, timeout: float | None = None) -> dict:
    """Ask a tritonserver in explicit model-control mode to (re)load model, through tritonclient's HTTP client.
    user:password@ in the URL becomes a Basic Authorization header; what we report shows the URL redacted."""
    result = {"server": _shown(url), "model": model}
    timeout = timeout or load_timeout()
    try:
        with Server(url, timeout) as server:
            server.load(model)
        return {**result, "ok": True, "status": 200, "message": "loaded"}
    except Exception as e:  # noqa: BLE001 - refused, unreachable, timed out: reported per server, never raised
        if refused(e) is not None:
            status = e.status()
            return {**result, "ok": False, "status": int(status) if str(status).isdigit() else None,
                    "message": redact(refused(e))[:500]}
        text = redact(f"{type(e).__name__}: {e}")[:400]
        if isinstance(e, TimeoutError) or "timeout" in type(e).__name__.lower():
            text = f"the load did not finish within {timeout:g} s ({LOAD_TIMEOUT_ENV} sets it): {text}"
        return {**result, "ok": False, "status": None, "message": text}
