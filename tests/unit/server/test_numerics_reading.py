"""The fingerprint of a server's Python side (server/numerics.py): read by the stub's interpreter
with the server's environment, once per (interpreter, installs, deciding variables, machine) —
a second server of the same kind answers from the tool environment's record without starting an
interpreter (importing torch there costs ~1.5 s of CPU per server start), and anything that can
change the reading makes a new one. A real interpreter reads it; nothing is mocked but the count
of the interpreters started."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tritonbuild.server import numerics
from tritonbuild.server.toolenv import STUB_PATH_VAR, ToolEnv


@pytest.fixture
def side(tmp_path, monkeypatch):
    """A server's Python side: a tool environment whose interpreter is this one's base (isolated,
    it imports no math library: a reading takes milliseconds), and a counter of the interpreters
    started to read its fingerprint."""
    env_dir = tmp_path / "env"
    (env_dir / "bin").mkdir(parents=True)
    (env_dir / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    python = ToolEnv(path=env_dir, python="3.11", libdir="", versions={})
    python.site_packages.mkdir(parents=True)
    started = []
    real = subprocess.Popen

    def counting(*args, **kwargs):
        started.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(numerics.subprocess, "Popen", counting)
    launcher = SimpleNamespace(bundled=True, tool_env=lambda: python)

    def read(**env):
        server = SimpleNamespace(launcher=launcher, started_env={"PATH": "/usr/bin", **env})
        return numerics.server_numerics(server)()

    return SimpleNamespace(read=read, started=started, python=python)


def test_a_second_server_of_the_same_kind_answers_from_the_record(side):
    first = side.read()
    assert first is not None and first["cpu"]["arch"]
    assert len(side.started) == 1
    assert side.read() == first
    assert len(side.started) == 1


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda s: {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}, id="a numerics variable"),
        pytest.param(lambda s: {"OMP_NUM_THREADS": "1"}, id="a thread count"),
        pytest.param(lambda s: {STUB_PATH_VAR: str(s.python.path)}, id="the stub's path"),
        pytest.param(lambda s: {"LD_PRELOAD": "libfoo.so"}, id="a preloaded library"),
    ],
)
def test_a_variable_that_can_change_the_reading_reads_again(side, change):
    before = side.read()
    after = side.read(**change(side))
    assert len(side.started) == 2
    assert before is not None and after is not None


def test_the_interpreters_own_variables_outside_the_deciding_set_do_not_read_again(side):
    side.read(PYTEST_CURRENT_TEST="a", TRITONBUILD_CACHE_DIR="/x")
    side.read(PYTEST_CURRENT_TEST="b", TRITONBUILD_CACHE_DIR="/y")
    assert len(side.started) == 1


def test_an_install_or_upgrade_in_the_environment_reads_again(side):
    side.read()
    (side.python.site_packages / "numpy-1.26.4.dist-info").mkdir()
    side.read()
    (side.python.site_packages / "numpy-1.26.4.dist-info").rename(
        side.python.site_packages / "numpy-2.2.6.dist-info"
    )
    side.read()
    assert len(side.started) == 3


def test_an_install_on_the_stubs_path_reads_again(side, tmp_path):
    extra = tmp_path / "site"
    extra.mkdir()
    side.read(PYTHONPATH=str(extra))
    (extra / "torch-2.13.0.dist-info").mkdir()
    side.read(PYTHONPATH=str(extra))
    assert len(side.started) == 2


def test_the_records_numerics_variables_are_the_servers(side):
    """The record answers for the variables it was read with: the reading under a cap names it."""
    capped = side.read(MKL_ENABLE_INSTRUCTIONS="AVX2")
    assert capped["env"] == {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}
    assert side.read()["env"] == {}


def test_a_failed_reading_is_none_and_never_recorded(side):
    """An interpreter that cannot read (here: one that exits 1) answers None, and the next server
    tries again instead of serving a recorded failure."""
    interpreter = side.python.interpreter
    interpreter.unlink()
    interpreter.write_text("#!/bin/sh\nexit 1\n")
    interpreter.chmod(0o755)
    assert side.read() is None
    assert side.read() is None
    assert len(side.started) == 2
    assert not list((side.python.path / "numerics").glob("*.json"))
