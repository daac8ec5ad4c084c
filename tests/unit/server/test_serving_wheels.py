"""The embedded server's environment for models that need plugin wheels (a vLLM model served invariant): unpacked
onto the stub's path in an environment tritonbuild made; in one used as it is (a GPU machine's own Python), taken as
installed when pip installed the same wheel there, else refused with the pip command that fixes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonbuild.backends.vllm.invariant import wheel as invariant
from tritonbuild.server import toolenv
from tritonbuild.server.embedded import EmbeddedServer, ServerStartError


class _Launcher:
    bundled = True

    def __init__(self, env: toolenv.ToolEnv):
        self._env = env

    def env(self) -> dict:
        return {"PATH": "/usr/bin"}

    def tool_env(self) -> toolenv.ToolEnv:
        return self._env


def _tool_env(root: Path, stub_path: bool) -> toolenv.ToolEnv:
    env = toolenv.ToolEnv(root, "3.11", "", {})
    env.site_packages.mkdir(parents=True)
    if stub_path:
        (env.site_packages / toolenv.PTH[0]).write_text(toolenv.PTH[1])
    return env


def _server(tmp_path, env, wheel):
    server = EmbeddedServer(
        tmp_path, launcher=_Launcher(env), env={"VLLM_BATCH_INVARIANT": "1"}, wheels=[wheel]
    )
    server._tmp = tmp_path / "server"
    server._tmp.mkdir(exist_ok=True)
    return server


def test_a_made_environment_gets_the_wheel_on_its_stub_path(tmp_path):
    wheel = invariant.plugin_wheel(tmp_path / "plugins")
    got = _server(tmp_path, _tool_env(tmp_path / "made", True), wheel)._env()
    site = tmp_path / "server" / "site"
    assert got["VLLM_BATCH_INVARIANT"] == "1"
    assert got[toolenv.STUB_PATH_VAR].split(":")[0] == str(site) and got["PYTHONPATH"].split(":")[
        0
    ] == str(site)
    assert (site / invariant.DIST / "__init__.py").is_file()
    assert (site / invariant.DIST / "linear16.py").is_file()


def test_an_environment_used_as_it_is_needs_the_wheel_installed(tmp_path):
    wheel = invariant.plugin_wheel(tmp_path / "plugins")
    env = _tool_env(tmp_path / "own", False)
    with pytest.raises(
        ServerStartError, match=r"pip install --no-deps .*tritonbuild_vllm_invariant"
    ):
        _server(tmp_path, env, wheel)._env()
    version = invariant.plugin_version()
    (env.site_packages / f"{invariant.DIST}-{version}.dist-info").mkdir()  # what pip install leaves
    got = _server(tmp_path, env, wheel)._env()
    assert got["VLLM_BATCH_INVARIANT"] == "1" and toolenv.STUB_PATH_VAR not in got
