"""serve --backend NAME=DIR: a Python-based backend (Triton's vLLM backend is one: a directory with model.py)
placed beside the python backend of the embedded tritonserver, and the repository's models of it loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonbuild.server import toolenv
from tritonbuild.server.embedded import EmbeddedServer, ServerStartError


def test_a_backend_without_model_py_is_a_usage_error(cli, tmp_path):
    (tmp_path / "repo").mkdir()
    r = cli("serve", tmp_path / "repo", "--backend", f"vllm={tmp_path}")
    assert r.exit_code == 2 and "NAME=DIR with DIR/model.py" in r.output


def test_backends_are_placed_in_the_servers_backend_directory(tmp_path):
    if toolenv.available() is None:
        pytest.skip(
            "the embedded server's environment is not made here (tritonbuild embedded install)"
        )
    src = tmp_path / "vllm_backend"
    (src / "utils").mkdir(parents=True)
    (src / "model.py").write_text("# the backend's model.py\n")
    (src / "utils" / "request.py").write_text("# a module beside it\n")

    def backend_dir(server, scratch) -> Path:
        server._tmp = scratch
        scratch.mkdir()
        argv = server.argv()
        return Path(next(a for a in argv if a.startswith("--backend-directory=")).split("=", 1)[1])

    server = EmbeddedServer(tmp_path / "repo", backends={"vllm": src})
    backends = backend_dir(server, tmp_path / "server")
    assert (backends / "python" / "triton_python_backend_stub").is_file()
    assert (backends / "vllm" / "model.py").read_text() == "# the backend's model.py\n"
    assert (backends / "vllm" / "utils" / "request.py").is_file()
    (src / "model.py").unlink()
    with pytest.raises(ServerStartError, match=r"holds no model\.py"):
        backend_dir(server, tmp_path / "server2")


def test_api_serve_loads_the_models_of_a_given_backend(tmp_path, monkeypatch):
    from tritonbuild import api

    def model(**fields):
        return type("M", (), fields)()

    manifest = type(
        "Mf",
        (),
        {
            "models": [
                model(name="llm", backend="vllm", target="gpu", llm={}),
                model(name="py", backend="python", target="cpu", llm=None),
            ]
        },
    )()
    from tritonbuild.repository.manifest import MANIFEST_NAME

    (tmp_path / MANIFEST_NAME).write_text(
        "{}"
    )  # read_repository is replaced: only its presence counts
    from tritonbuild.api import serving

    monkeypatch.setattr(serving, "read_repository", lambda *_: manifest)
    served = api.serve(tmp_path, backends={"vllm": tmp_path})
    assert served.loadable == ["llm", "py"] and served.not_loadable == []
    served = api.serve(tmp_path)
    assert served.loadable == ["py"] and served.not_loadable == ["llm"]
