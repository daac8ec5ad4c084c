"""Rollback across an interface change, served live: the embedded tritonserver on the file target answers
version 1 through version 1's input name after the rollback."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import PY_MODEL, PY_RECIPE

pytestmark = pytest.mark.triton


def test_rolled_back_model_answers(cli, tmp_path):
    import tritonclient.http as httpclient

    from tritonbuild.server.embedded import EmbeddedServer

    target = tmp_path / "pub"
    for version, name, factor in ((1, "X", "2"), (2, "B", "3")):
        src = tmp_path / f"src{version}"
        src.mkdir()
        (src / "model.py").write_text(
            PY_MODEL.replace('"X"', f'"{name}"').replace("x * 2", f"x * {factor}")
        )
        (src / "r.yaml").write_text(
            PY_RECIPE.replace("version: 1", f"version: {version}")
            .replace("name: X", f"name: {name}")
            .lstrip()
        )
        out = tmp_path / f"out{version}"
        assert cli("build", src / "r.yaml", "-o", out).exit_code == 0
        assert cli("publish", out, f"file://{target}", "--skip-verify").exit_code == 0
    assert cli("rollback", f"file://{target}", "doubler", "--to", "1").exit_code == 0

    x = np.arange(3, dtype=np.float32).reshape(1, 3)
    with EmbeddedServer(target) as server:
        server.load("doubler")
        client = httpclient.InferenceServerClient(server.http_url)
        inp = httpclient.InferInput("X", [1, 3], "FP32")
        inp.set_data_from_numpy(x)
        res = client.infer("doubler", [inp], model_version="1")
        np.testing.assert_array_equal(res.as_numpy("Y"), x * 2 + 1)
        assert client.get_model_metadata("doubler")["versions"] == ["1"]
        client.close()


def test_two_versions_served_side_by_side(cli, tmp_path):
    """version_policy latest 2: the target pins both complete versions; clients pinning a version get its answer."""
    import tritonclient.http as httpclient

    from tritonbuild.server.embedded import EmbeddedServer

    target = tmp_path / "pub"
    for version, factor in ((1, "2"), (2, "3")):
        src = tmp_path / f"src{version}"
        src.mkdir()
        (src / "model.py").write_text(PY_MODEL.replace("x * 2", f"x * {factor}"))
        (src / "r.yaml").write_text(
            PY_RECIPE.replace("version: 1", f"version: {version}").lstrip()
            + "version_policy: {latest: 2}\n"
        )
        out = tmp_path / f"out{version}"
        assert cli("build", src / "r.yaml", "-o", out).exit_code == 0
        assert cli("publish", out, f"file://{target}", "--skip-verify").exit_code == 0

    x = np.arange(3, dtype=np.float32).reshape(1, 3)
    with EmbeddedServer(target) as server:
        server.load("doubler")
        client = httpclient.InferenceServerClient(server.http_url)
        for version, factor in (("1", 2), ("2", 3)):
            inp = httpclient.InferInput("X", [1, 3], "FP32")
            inp.set_data_from_numpy(x)
            res = client.infer("doubler", [inp], model_version=version)
            np.testing.assert_array_equal(res.as_numpy("Y"), x * factor + 1)
        client.close()
