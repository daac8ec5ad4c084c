"""Triton's HTTP API through tritonclient's HTTP client: health, server metadata, the repository
index, a model's config and version readiness, load (with a config override and files) and unload.
Every tritonbuild call to a tritonserver goes through here, except the endpoints tritonclient has no
call for (generate, the Prometheus metrics text), which triton/plain_http.py sends. user:password@
in a URL becomes a Basic Authorization header."""

from __future__ import annotations

import base64
from urllib.parse import unquote, urlsplit

from tritonbuild.core.objstore import CONNECT_TIMEOUT_S
from tritonbuild.core.stores import with_scheme


def http_module():
    """tritonclient.http, with Ctrl-C kept off stderr in its event loop: geventhttpclient runs on
    gevent's hub, and a KeyboardInterrupt the SIGINT handler raises while the hub runs is printed by
    the hub (traceback and a timestamp) before the hub throws it to the main greenlet, where the CLI
    says "interrupted". gevent prints no error of a type in NOT_ERROR and still throws a
    SYSTEM_ERROR (KeyboardInterrupt among them) to the main greenlet (gevent/hub.py
    Hub.handle_error), so KeyboardInterrupt joins NOT_ERROR: the class's, and this thread's hub's,
    which may hold its own copy (gevent's thread resolver extends NOT_ERROR on the hub instance)."""
    import tritonclient.http as httpclient
    from gevent.hub import Hub, get_hub

    for holder in (Hub, get_hub()):
        if not issubclass(KeyboardInterrupt, holder.NOT_ERROR):
            holder.NOT_ERROR = (*holder.NOT_ERROR, KeyboardInterrupt)
    return httpclient


class Server:
    """One tritonserver at url, asked through one tritonclient HTTP client; a context manager that
    closes it. Failures propagate: InferenceServerException when the server answered an error
    (refused() gives its text), anything else (OSError, a timeout) when it did not answer."""

    def __init__(self, url: str, timeout: float):
        InferenceServerClient = http_module().InferenceServerClient

        parts = urlsplit(with_scheme(url))
        self.headers: dict[str, str] | None = None
        if parts.username is not None:
            credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            self.headers = {"Authorization": "Basic " + base64.b64encode(credentials).decode()}
        host = parts.netloc.rsplit("@", 1)[-1] + parts.path.rstrip("/")
        self.client = InferenceServerClient(
            host,
            ssl=parts.scheme == "https",
            network_timeout=timeout,
            connection_timeout=min(CONNECT_TIMEOUT_S, timeout),
        )

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.client.close()

    def live(self) -> bool:
        return bool(self.client.is_server_live(headers=self.headers))

    def ready(self) -> bool:
        return bool(self.client.is_server_ready(headers=self.headers))

    def metadata(self) -> dict:
        """GET v2: name, version, extensions."""
        return self.client.get_server_metadata(headers=self.headers)

    def index(self) -> list[dict]:
        """POST v2/repository/index: one entry per model version the repository holds (name,
        version, state)."""
        return list(self.client.get_model_repository_index(headers=self.headers) or [])

    def model_config(self, name: str) -> dict:
        """GET v2/models/<name>/config, as Triton's JSON form of ModelConfig."""
        return self.client.get_model_config(name, headers=self.headers)

    def version_ready(self, name: str, version: int | str) -> bool:
        return bool(self.client.is_model_ready(name, str(version), headers=self.headers))

    def load(
        self, name: str, config: str | None = None, files: dict[str, bytes] | None = None
    ) -> None:
        """POST v2/repository/models/<name>/load, with a JSON config override and files (relative
        path → bytes) the server does not hold; answers once the model is loaded."""
        prefixed = {f"file:{rel}": data for rel, data in files.items()} if files else None
        self.client.load_model(name, headers=self.headers, config=config, files=prefixed)

    def unload(self, name: str) -> None:
        self.client.unload_model(name, headers=self.headers)


def refused(error: BaseException) -> str | None:
    """Triton's own message when error is its answer (tritonclient's InferenceServerException), else
    None."""
    from tritonclient.utils import InferenceServerException

    if isinstance(error, InferenceServerException):
        return error.message() or str(error)
    return None


def timed_out(error: BaseException) -> bool:
    """The request got no answer in its time (tritonclient's gevent transport raises its own timeout
    types)."""
    return (
        isinstance(error, TimeoutError)
        or "timeout" in type(error).__name__.lower()
        or "timed out" in str(error).lower()
    )


def server_version(url: str, timeout: float = 5.0) -> str | None:
    """The version the server at url reports (GET v2), or None when it does not answer."""
    try:
        with Server(url, timeout) as server:
            return server.metadata().get("version")
    except Exception:  # noqa: BLE001 - unreachable or refused: the caller shows it as unknown
        return None


def is_live(url: str, timeout: float = 2.0) -> bool:
    """Whether the server at url answers GET v2/health/live with 200; False when it does not
    answer."""
    try:
        with Server(url, timeout) as server:
            return server.live()
    except Exception:  # noqa: BLE001 - not (yet) listening
        return False
