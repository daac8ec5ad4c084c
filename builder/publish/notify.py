"""Telling tritonservers in explicit model-control mode what was published: which models they do not
have READY, and the load request itself (tritonclient's HTTP client; user:password@ in a URL becomes
Basic auth)."""

from __future__ import annotations

import os

from tritonbuild.core.secrets import redact
from tritonbuild.core.stores import with_scheme
from tritonbuild.triton.client import Server, refused

LOAD_TIMEOUT_ENV = "TRITONBUILD_NOTIFY_LOAD_TIMEOUT_S"
DEFAULT_LOAD_TIMEOUT_S = 300.0


def load_timeout() -> float:
    """How long a load request may take: the server answers only once the model is loaded (minutes
    for a large one), so this is longer than the network deadline; the index request before it is
    not."""
    try:
        value = float(os.environ.get(LOAD_TIMEOUT_ENV, DEFAULT_LOAD_TIMEOUT_S))
    except ValueError:
        value = DEFAULT_LOAD_TIMEOUT_S
    return value if value > 0 else DEFAULT_LOAD_TIMEOUT_S


def repository_index(url: str) -> tuple[dict[str, str] | None, str | None]:
    """(model → state in the server's repository index, None) or (None, why it could not be asked);
    a model its repository holds but it never loaded has state '' (Triton lists those without one).
    The index request waits at most the network deadline, so a server that never answers is found in
    that time and is sent no load request."""
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
        return (
            None,
            text if "network deadline" in text else f"no answer within {deadline_words()}: {text}",
        )
    # NOTE: a model unloaded from this server (reason 'unloaded': by its operator, or by us after it
    # could not load it) is one it does not serve, as one never loaded: neither is asked for it
    # while another serves it
    return {
        e["name"]: "" if e.get("reason") == "unloaded" else e.get("state") or ""
        for e in index or []
        if isinstance(e, dict) and e.get("name")
    }, None


def _no_answer(e: BaseException) -> bool:
    """The server never answered (timed out, refused or unreachable), as opposed to answering an
    error."""
    from tritonbuild.core.objstore import classify

    return (
        classify(e) == "network"
        or "timeout" in type(e).__name__.lower()
        or "timed out" in str(e).lower()
    )


def mapped_models(url: str) -> set[str] | None:
    """The models the operator maps to a server (--notify URL#MODEL,MODEL), or None: not mapped."""
    from urllib.parse import urlsplit

    fragment = urlsplit(url).fragment
    return {name for name in fragment.split(",") if name} if fragment else None


def notify_all(urls: tuple[str, ...], changed: set[str], published: list[str]) -> list[dict]:
    """Per server: load each model whose config.pbtxt this publish changed. A model it did not change
    is never asked, READY or not (never loaded there, or UNAVAILABLE after a failed load): its load
    could only fail the publish or flip the server's strict readiness over a model the publish did
    not touch; one the server holds but not READY is reported as not asked. A server that does not
    answer its index is reported once per changed model, with no load request sent. In a mixed
    fleet a server is asked only for the models it serves: those the operator maps to it
    (URL#MODEL,MODEL), else those its index shows a state for (loaded, loading, or a failed load); a
    changed model no notified server serves yet (new, or every server restarted) is asked of every
    unmapped server; one left out is reported as skipped, with the servers that serve it. A server
    whose load of a model failed while another serves it is asked again only when that model
    changes."""
    indexes = {url: repository_index(url) for url in urls}
    served = {
        url: mapped_models(url)
        if mapped_models(url) is not None
        else {name for name, state in (states or {}).items() if state}
        for url, (states, _) in indexes.items()
    }
    ready = {
        (name, url)
        for url, (states, _) in indexes.items()
        for name, state in (states or {}).items()
        if state == "READY"
    }
    out = []
    for url in urls:
        states, why = indexes[url]
        if states is None:
            out += _unanswered(url, why, changed, served[url])
        else:
            out += _ask(url, states, urls, changed, published, served)
    loaded = {
        (result["model"], result["server"])
        for result in out
        if result["ok"] and not result.get("skipped")
    }
    loaded |= {(name, _shown(url)) for name, url in ready}
    return [_settle(result, loaded) for result in out]


def _unanswered(url: str, why: str, names: set[str], served_here: set[str]) -> list[dict]:
    """A server that did not answer its index: a failure for each model it would have been asked
    for."""
    shown = _shown(url)
    return [
        {"server": shown, "model": name, "ok": False, "status": None, "message": why}
        for name in sorted(names)
        if name in served_here or not mapped_models(url)
    ]


def _ask(
    url: str,
    states: dict[str, str],
    urls: tuple[str, ...],
    changed: set[str],
    published: list[str],
    served: dict[str, set[str]],
) -> list[dict]:
    """A server that answered its index: each changed model is loaded, or skipped with the reason
    (another server serves it, or it is mapped to others); an unchanged one it holds but not READY
    is said, never asked."""
    out = []
    for name in sorted(set(published) - changed):
        state = states.get(name) or "READY"
        if state != "READY":  # held here, not READY (a failed load, a load under way): said
            why = "its last load failed here" if state == "UNAVAILABLE" else f"{state} here"
            out.append(_skipped(url, name, [], f"{why} and this publish did not change it"))
    for name in sorted(changed):
        serving = [other for other in urls if name in served[other]]
        if (serving and url not in serving) or (
            mapped_models(url) is not None and name not in served[url]
        ):
            out.append(
                _skipped(
                    url,
                    name,
                    serving,
                    "this server does not serve it (not mapped to it, or its "
                    "repository index shows no load of it)",
                )
            )
        else:
            out.append({**notify_server(url, name), "was_ready": states.get(name) == "READY"})
    return out


def _skipped(url: str, name: str, serving: list[str], why: str) -> dict:
    by = f"; served by {', '.join(map(_shown, serving))}" if serving else ""
    return {
        "server": _shown(url),
        "model": name,
        "ok": True,
        "status": None,
        "skipped": True,
        "message": f"not asked for {name!r}: {why}{by}",
    }


def _settle(result: dict, loaded: set[tuple[str, str]]) -> dict:
    """A load this server refused (it answered an error) of a model it did not serve, which another
    server loaded: this server cannot run it; reported, and not a failure of the publish. Triton
    keeps the failed version's state (an unload leaves a version that is not READY as it is: core
    model_lifecycle.cc AsyncUnload), so under strict readiness the server reports not-ready until a
    load of it succeeds: run the fleet with --strict-readiness=false (deploy-snippets does) or map
    models to servers (URL#MODEL,...)."""
    was_ready = result.pop("was_ready", True)
    if result["ok"] or result.get("status") is None or was_ready:
        return result
    loaded_elsewhere = sorted(
        server
        for model, server in loaded
        if model == result["model"] and server != result["server"]
    )
    if not loaded_elsewhere:
        return result
    return {
        **result,
        "cannot_run": True,
        "message": f"this server cannot run {result['model']!r} ({', '.join(loaded_elsewhere)} serves it; "
        f"not asked again until it changes): {result['message']}",
    }


def failures(results: list[dict]) -> list[dict]:
    """The notify results that fail a publish or rollback: a server that did not answer, or a model
    no server could load; one server that cannot run a model others serve is reported, not a
    failure."""
    return [result for result in results if not result["ok"] and not result.get("cannot_run")]


def _shown(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(with_scheme(url))
    return redact(f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/"))


def notify_server(url: str, model: str, timeout: float | None = None) -> dict:
    """Ask a tritonserver in explicit model-control mode to (re)load model, through tritonclient's
    HTTP client. user:password@ in the URL becomes a Basic Authorization header; what we report
    shows the URL redacted."""
    result = {"server": _shown(url), "model": model}
    timeout = timeout or load_timeout()
    try:
        with Server(url, timeout) as server:
            server.load(model)
        return {**result, "ok": True, "status": 200, "message": "loaded"}
    except Exception as e:  # noqa: BLE001 - refused, unreachable, timed out: reported per server, never raised
        if refused(e) is not None:
            status = e.status()
            return {
                **result,
                "ok": False,
                "status": int(status) if str(status).isdigit() else None,
                "message": redact(refused(e))[:500],
            }
        text = redact(f"{type(e).__name__}: {e}")[:400]
        if isinstance(e, TimeoutError) or "timeout" in type(e).__name__.lower():
            text = (
                f"the load did not finish within {timeout:g} s ({LOAD_TIMEOUT_ENV} sets it): {text}"
            )
        return {**result, "ok": False, "status": None, "message": text}
