"""The target image's Python (server/target.py): where the target comes from, which interpreter and
which environment the embedded server's Python side then gets (one per Python minor, side by side),
what a missing Python says, and how the report shows a mismatch. Real pyenv interpreters where a
test needs one (skipped without them); nothing is installed."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tritonbuild.cli.python_side import python_line
from tritonbuild.errors import ServerStartError, UsageError, VerifyError
from tritonbuild.server import launcher, target, toolenv

PYENV = Path.home() / ".pyenv" / "versions"


def _interpreter(minor: str) -> str | None:
    found = sorted(PYENV.glob(f"{minor}.*/bin/python"))
    return str(found[-1]) if found else None


@pytest.fixture
def envs(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITONBUILD_ENVS_DIR", str(tmp_path / "envs"))
    monkeypatch.delenv("TRITONBUILD_EMBEDDED_PACKAGES", raising=False)
    monkeypatch.delenv("TRITONBUILD_EMBEDDED_PYTHON", raising=False)
    monkeypatch.setenv("PYENV_ROOT", str(PYENV.parent))
    monkeypatch.setenv(
        "PATH", str(tmp_path / "bin")
    )  # nothing on PATH: pyenv's versions are searched
    monkeypatch.setattr(toolenv, "current", lambda *_: None)  # this venv is never the one used
    return tmp_path / "envs"


def _made(envs: Path, minor: str) -> Path:
    """A made environment of that minor: record, venv python, bundled tritonserver and the stubs."""
    path = envs / toolenv.env_name(minor, ())
    server = path / "lib" / f"python{minor}" / "site-packages" / "pytriton" / "tritonserver"
    (server / "bin").mkdir(parents=True)
    (server / "bin" / "tritonserver").write_text("")
    (server / "backends" / "python").mkdir(parents=True)
    for each in ("3.10", "3.11", "3.12"):
        (server / "python_backend_stubs" / each).mkdir(parents=True)
        (server / "python_backend_stubs" / each / "triton_python_backend_stub").write_text(each)
    (path / "bin").mkdir()
    (path / "bin" / "python").symlink_to(sys.executable)
    record = {"python": minor, "libdir": f"/lib{minor}", "versions": {"numpy": "1.26.4"}}
    (path / toolenv.RECORD).write_text(json.dumps(record))
    return path


def _both_pythons() -> tuple[str, str]:
    py310, py312 = _interpreter("3.10"), _interpreter("3.12")
    if not (py310 and py312):
        pytest.skip("needs Python 3.10 and 3.12 under pyenv")
    return py310, py312


def test_an_image_whose_python_is_not_recorded_is_a_usage_error():
    with pytest.raises(UsageError) as e:
        target.given_target("myregistry/triton:1.0")
    assert e.value.exit_code == 2 and "myregistry/triton:1.0" in e.value.message
    assert "24.08-py3" in e.value.hint and "TRITONBUILD_EMBEDDED_PYTHON" in e.value.hint
    assert target.given_target("24.08") == target.Target(
        "nvcr.io/nvidia/tritonserver:24.08-py3", "3.10", "--triton-image"
    )


def test_the_recipes_serving_image_is_the_target_unless_one_is_given():
    def model(name, image):
        return SimpleNamespace(name=name, llm={"serving_image": image} if image else None)

    manifest = SimpleNamespace(
        models=[
            model("scorer", None),
            model("chat", "nvcr.io/nvidia/tritonserver:24.10-vllm-python-py3"),
        ]
    )
    found = target.target_for(None, manifest)
    assert (found.python, found.source) == ("3.10", "the recipe of 'chat': image.triton_image")
    assert target.target_for("25.01", manifest).python == "3.12"  # the option wins
    assert target.target_for(None, SimpleNamespace(models=[model("a", None)])) is None
    assert target.target_for(None, SimpleNamespace(models=[model("a", "my/own:1")])) is None
    manifest.models.append(model("other", "nvcr.io/nvidia/tritonserver:25.01-trtllm-python-py3"))
    with pytest.raises(VerifyError, match="different Pythons") as e:
        target.target_for(None, manifest)
    assert "--triton-image" in e.value.hint


def test_the_target_minor_picks_that_interpreter(envs):
    py310, py312 = _both_pythons()
    assert toolenv.find_python("3.10")[:2] == (py310, "3.10")
    assert toolenv.find_python("3.12")[:2] == (py312, "3.12")


def test_environments_of_two_minors_sit_side_by_side(envs, monkeypatch):
    """Making the 3.12 one leaves the 3.10 one as it was; each target finds its own."""
    _both_pythons()
    old = _made(envs, "3.10")
    before = sorted(str(p.relative_to(old)) for p in old.rglob("*"))
    made = []

    def fake_make(python, minor, libdir, path):
        made.append((python, minor))
        return toolenv._read(_made(path.parent, minor))

    monkeypatch.setattr(toolenv, "_make", fake_make)
    newer = toolenv.ensure(lambda _line: None, minor="3.12")
    assert made == [(_interpreter("3.12"), "3.12")] and newer.python == "3.12"
    assert newer.path != old and sorted(str(p.relative_to(old)) for p in old.rglob("*")) == before
    assert toolenv.find("3.10").path == old and toolenv.find("3.12").path == newer.path
    assert toolenv.ensure(minor="3.10").path == old and len(made) == 1  # found, not made again


def test_the_embedded_server_runs_the_target_images_python_stub(envs, tmp_path):
    """launcher_for with a 24.xx target: the 3.10 environment, its libpython, and the 3.10 stub."""
    _made(envs, "3.10")
    _made(envs, "3.12")
    chosen = launcher.launcher_for(target.ServingTarget(triton_image="24.08-py3"))
    assert chosen.tool_env().python == "3.10"
    backends = chosen.backend_dir(tmp_path / "scratch")
    assert (backends / "python" / "triton_python_backend_stub").read_text() == "3.10"
    assert chosen.env()["LD_LIBRARY_PATH"].startswith("/lib3.10:")
    side = chosen.python_side()
    assert (side["ran"], side["target"], side["matches"]) == ("3.10", "3.10", True)
    assert (
        launcher.launcher_for(target.ServingTarget(triton_image="25.01")).tool_env().python
        == "3.12"
    )


def test_a_target_python_not_on_this_machine_names_what_to_install(envs, tmp_path, monkeypatch):
    if sys.version_info[:2] == (3, 10):
        pytest.skip("this interpreter is the 3.10 asked for")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    wanted = target.given_target("24.08-py3").wanted()
    with pytest.raises(toolenv.ServerStartError) as e:
        toolenv.ensure(minor="3.10", wanted=wanted)
    assert e.value.exit_code == 11
    assert e.value.message.startswith(
        "the target image nvcr.io/nvidia/tritonserver:24.08-py3 (--triton-image) runs Python 3.10"
    )
    assert "pyenv install 3.10" in e.value.hint and "TRITONBUILD_EMBEDDED_PYTHON" in e.value.hint
    assert not envs.exists() or not list(envs.glob("embedded-*"))  # nothing half-made


def test_a_named_interpreter_of_another_minor_is_used_and_the_mismatch_shown(envs, monkeypatch):
    _py310, py312 = _both_pythons()
    monkeypatch.setenv("TRITONBUILD_EMBEDDED_PYTHON", py312)
    assert toolenv.find_python("3.10")[:2] == (py312, "3.12")
    _made(envs, "3.12")
    aimed = target.ServingTarget(triton_image="24.10-py3")
    side = launcher.reported_python(aimed)
    assert (side["ran"], side["target"], side["matches"]) == ("3.12", "3.10", False)
    line = python_line(side)
    assert "Python 3.12" in line and "runs Python 3.10" in line and "MISMATCH" in line


def test_a_containers_or_installs_own_python_is_not_claimed(envs, tmp_path):
    aimed = target.ServingTarget(triton_image="25.01")
    side = launcher.reported_python(
        target.ServingTarget("docker:nvcr.io/nvidia/tritonserver:25.01-py3", "25.01")
    )
    assert (side["ran"], side["own"], side["target"], side["matches"]) == (None, True, "3.12", None)
    assert python_line(side).startswith("Python side: the server's own; the target image")
    nothing = launcher.reported_python(aimed)  # no 3.12 environment made in envs: none ran
    assert (nothing["ran"], nothing["own"]) == (None, False)
    assert python_line(nothing).startswith("Python side: the embedded server's did not run here")
    assert python_line(target.python_side(None, None, None)) is None


def test_a_recipes_image_runs_and_falls_back_saying_why(monkeypatch):
    """A recipe's image (25.12 → Python 3.12) runs its Python, with the models' imports
    (sources); when that Python cannot be had here, the default environment runs instead, asked once
    per run, and the report says why (MISMATCH). --triton-image's target is strict: an error."""
    asked = []

    def ensure(**kwargs):
        asked.append(kwargs)
        if kwargs.get("minor") == "3.12" and broken:
            raise ServerStartError("no Python 3.12 with a shared libpython was found", hint="")
        return f"env{kwargs.get('minor', '')}"

    monkeypatch.setattr(toolenv, "ensure", ensure)
    monkeypatch.setattr(launcher, "_NOT_RUN", {})
    model = SimpleNamespace(
        name="chat", llm={"serving_image": "nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3"}
    )
    from_recipe = target.target_for(None, SimpleNamespace(models=[model]))
    assert (from_recipe.python, from_recipe.enforced) == ("3.12", False)
    repo = (Path("/repo"),)
    broken = False
    assert launcher._tool_env(from_recipe, repo) == ("env3.12", None)
    assert asked[-1]["minor"] == "3.12" and asked[-1]["sources"] == repo
    broken = True
    why = "no Python 3.12 with a shared libpython was found"
    assert launcher._tool_env(from_recipe, repo) == ("env", why)
    assert launcher._tool_env(from_recipe, repo) == ("env", why)  # 3.12 not asked again
    assert [each.get("minor") for each in asked] == ["3.12", "3.12", None, None]
    assert all(each["sources"] == repo for each in asked)
    with pytest.raises(ServerStartError):
        launcher._tool_env(target.given_target("25.12-trtllm-python-py3"), repo)
    side = launcher.reported_python(target.ServingTarget(recipes_image=from_recipe), repo)
    assert side["not_run"] == why and side["target"] == "3.12"
    side = target.python_side("3.11", "/envs/embedded-py3.11", from_recipe, why=why)
    line = python_line(side)
    assert line.endswith(f"MISMATCH (not run here: {why})"), line


def test_the_serving_target_is_one_frozen_object_resolved_once():
    """--tritonserver and --triton-image travel as one ServingTarget from the api's edge to verify,
    serve, tune, infer, build and embedded: the image resolves to its Python once, where first asked
    (an unknown image is the same usage error as before, raised at the same point), and wins over
    the image a repository's recipes name."""
    chat = SimpleNamespace(
        name="chat", llm={"serving_image": "nvcr.io/nvidia/tritonserver:24.10-vllm-python-py3"}
    )
    manifest = SimpleNamespace(models=[chat])
    serving = target.ServingTarget(
        tritonserver="/opt/tritonserver/bin/tritonserver", triton_image="25.01"
    )
    assert serving.image.python == "3.12" and serving.image is serving.image
    assert serving.for_repository(manifest) is serving and serving.target is serving.image
    recipes = target.ServingTarget().for_repository(manifest)
    assert recipes.target.python == "3.10" and recipes.tritonserver is None  # the recipe's image
    assert target.ServingTarget().target is None and target.ServingTarget() == target.EMBEDDED
    with pytest.raises(dataclasses.FrozenInstanceError):
        serving.tritonserver = None
    unknown = target.ServingTarget(triton_image="my/own:1")  # made without asking
    with pytest.raises(UsageError, match="--triton-image my/own:1"):
        unknown.for_repository(manifest)
    with pytest.raises(UsageError, match="--triton-image my/own:1"):
        unknown.checked()
