"""Triton's model-control API as tune uses it: load a model with a config override (and files, for one the
server does not hold), unload it. Works against the embedded server and any server in explicit mode."""

from __future__ import annotations

import base64
import urllib.error
from contextlib import suppress

from tritonbuild.server.embedded import ModelLoadError, RepositoryRefusal, repository_post


def _post(url: str, path: str, body: dict, timeout: float = 600.0) -> None:
    try:
        repository_post(url, path, body, timeout)
    except RepositoryRefusal as e:
        raise ModelLoadError(e.text) from None
    except (urllib.error.URLError, OSError) as e:
        raise ModelLoadError(f"cannot reach {url}: {e}") from None


def load_with_config(url: str, name: str, mc, files: dict[str, bytes] | None = None) -> None:
    """Triton's load API with a config override (and files, for a model the server does not hold)."""
    from google.protobuf import json_format

    params = {"config": json_format.MessageToJson(mc, preserving_proto_field_name=True)}
    for rel, data in (files or {}).items():
        params[f"file:{rel}"] = base64.b64encode(data).decode()
    _post(url, f"/v2/repository/models/{name}/load", {"parameters": params})


def unload(url: str, name: str) -> None:
    with suppress(ModelLoadError):
        _post(url, f"/v2/repository/models/{name}/unload", {})
