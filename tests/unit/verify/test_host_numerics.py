"""verify --server's numerics for a model whose bits its host decides (backend route live-server: vLLM, TensorRT,
TensorRT-LLM): read beside a server on this host (loopback URL), never for a server elsewhere or a model the
embedded server's Python side runs (its own fingerprint is read there)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tritonbuild.core.numerics import deciding
from tritonbuild.verify.served import host_numerics


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "http://localhost:8000"])
def test_a_loopback_server_of_a_server_only_backend_is_fingerprinted_beside_it(url):
    got = host_numerics(url, SimpleNamespace(backend="vllm"))
    assert got["read"].startswith("beside the server") and "cpu" in got
    assert "read" not in deciding(got)  # where it was read is no machine difference


@pytest.mark.parametrize(
    "url, backend",
    [("http://10.0.0.5:8000", "vllm"), ("http://127.0.0.1:8000", "python"), (None, "vllm")],
)
def test_elsewhere_or_embedded_backends_get_none(url, backend):
    assert host_numerics(url, SimpleNamespace(backend=backend)) is None
