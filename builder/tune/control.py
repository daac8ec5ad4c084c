"""Triton's model-control API as tune uses it: load a model with a config override (and files, for
one the server does not hold), unload it. Works against the embedded server and any server in
explicit mode."""

from __future__ import annotations

from contextlib import suppress

from tritonbuild.server.loading import ModelLoadError
from tritonbuild.triton.client import Server, refused

LOAD_TIMEOUT_S = 600.0


def load_with_config(url: str, name: str, mc, files: dict[str, bytes] | None = None) -> None:
    """Triton's load API with a config override (and files, for a model the server does not
    hold)."""
    from google.protobuf import json_format

    config = json_format.MessageToJson(mc, preserving_proto_field_name=True)
    try:
        with Server(url, LOAD_TIMEOUT_S) as server:
            server.load(name, config=config, files=files)
    # Triton's refusal carries its text; anything else: no answer
    except Exception as e:  # noqa: BLE001
        text = refused(e)
        raise ModelLoadError(text if text is not None else f"cannot reach {url}: {e}") from None


def unload(url: str, name: str) -> None:
    with suppress(Exception), Server(url, LOAD_TIMEOUT_S) as server:
        server.unload(name)
