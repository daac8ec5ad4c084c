"""What the embedded server's environment of another Python minor gets installed so the models import
there what they import here (server/mirror.py, toolenv.mirror_for, launcher.stub_env): read from the
models' own files and this environment's installed distributions; nothing is installed here."""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tritonbuild.server import envmake, launcher, mirror, toolenv

HERE = f"{sys.version_info[0]}.{sys.version_info[1]}"
OTHER = "3.10" if HERE != "3.10" else "3.12"

MODEL = """\
import json, os.path
import numpy as np
import triton_python_backend_utils as pb_utils
import yaml
from tokenizers import Tokenizer
from . import sibling
from helper import scale


def initialize(self, args):
    try:
        import sentencepiece
    except ImportError:
        sentencepiece = None
    import not_a_package_anywhere.sub
"""


@pytest.fixture
def repo(tmp_path) -> Path:
    version = tmp_path / "repo" / "tok" / "1"
    version.mkdir(parents=True)
    (version / "model.py").write_text(MODEL)
    (version / "helper.py").write_text("import google.protobuf\n")
    (version / "broken.py").write_text("import click\ndef (:\n")  # does not parse: skipped
    (tmp_path / "repo" / "tok" / "config.pbtxt").write_text('backend: "python"\n')
    return tmp_path / "repo"


def test_imports_are_the_third_party_modules_with_where_they_are_first_imported(repo):
    found = mirror.imports(mirror.python_files([repo]))
    assert found == {
        "numpy": "tok/1/model.py:2",
        "yaml": "tok/1/model.py:4",
        "tokenizers": "tok/1/model.py:5",
        "sentencepiece": "tok/1/model.py:12",
        "not_a_package_anywhere": "tok/1/model.py:15",
        "google": "tok/1/helper.py:1",
    }  # json/os (stdlib), the stub's module, the relative and the local import left out


def test_each_import_is_pinned_at_the_version_installed_here(repo):
    got = mirror.mirror_of([repo], OTHER)
    assert f"pyyaml=={metadata.version('pyyaml')}" in got.requirements
    assert f"tokenizers=={metadata.version('tokenizers')}" in got.requirements
    assert f"sentencepiece=={metadata.version('sentencepiece')}" in got.requirements
    assert f"protobuf=={metadata.version('protobuf')}" in got.requirements  # google.protobuf
    assert not any(each.startswith("numpy==") for each in got.requirements)  # the stub's < 2
    # tokenizers' own dependency, as installed here, pins what pip picks for the target
    assert f"huggingface-hub=={metadata.version('huggingface-hub')}" in got.constraints
    assert got.missing == ("not_a_package_anywhere (tok/1/model.py:15)",)


def test_a_package_the_user_names_is_not_pinned(repo):
    got = mirror.mirror_of([repo], OTHER, keep=("tokenizers>=0.20",))
    assert not any(each.startswith("tokenizers") for each in got.requirements + got.constraints)


def test_nothing_is_mirrored_on_this_minor_or_without_python_files(repo, tmp_path):
    assert not toolenv.mirror_for(HERE, (repo,))
    assert toolenv.mirror_for(OTHER, (repo,)).requirements
    (tmp_path / "plain" / "m" / "1").mkdir(parents=True)
    assert not toolenv.mirror_for(OTHER, (tmp_path / "plain",))
    assert not toolenv.mirror_for(OTHER, ())


def _env(root: Path, minor: str) -> toolenv.ToolEnv:
    return toolenv.ToolEnv(root / f"env{minor}", minor, "/lib", {"numpy": "1.26.4"})


def test_the_mirror_is_made_once_beside_the_environment_and_put_on_the_stubs_path(
    repo, tmp_path, monkeypatch
):
    monkeypatch.setenv("TRITONBUILD_ENVS_DIR", str(tmp_path / "envs"))
    (tmp_path / "envs").mkdir()
    made = []

    def make_mirror(python, numpy, target, wanted):
        made.append((python, numpy, wanted))
        (target / "site").mkdir(parents=True)
        (target / envmake.RECORD).write_text(json.dumps({"requirements": wanted.requirements}))

    monkeypatch.setattr(envmake, "make_mirror", make_mirror)
    env = _env(tmp_path, OTHER)
    assert toolenv._with_mirror(env, (repo,)) is None  # needed, not made, not to be made
    lines = []
    got = toolenv._with_mirror(env, (repo,), lines.append)
    assert got.mirror.parent.name.startswith(f"mirror-py{OTHER}-") and got.mirror.is_dir()
    assert made[0][:2] == (env.bin / "python", "1.26.4") and "pyyaml==" in lines[0]
    assert toolenv._with_mirror(env, (repo,), lines.append) == got and len(made) == 1
    seen = launcher.stub_env(got, tmp_path / "pytriton" / "tritonserver", {})
    assert seen[toolenv.STUB_PATH_VAR] == str(got.mirror)
    assert str(got.mirror) in seen["PYTHONPATH"].split(":")
    # another numpy in the environment, or other pins, is another mirror
    other = toolenv.ToolEnv(env.path, OTHER, "/lib", {"numpy": "1.26.3"})
    assert toolenv.mirror_name(other, made[0][2]) != got.mirror.parent.name


def test_a_mirror_that_pip_cannot_install_says_what_and_leaves_nothing(tmp_path, monkeypatch):
    """A pin with no release for the target's Python: the error names the pins and the way out."""
    wanted = mirror.Mirror(requirements=("tokenizers==0.0.0.dev0",))
    real = envmake._run
    monkeypatch.setattr(
        envmake,
        "_run",
        lambda argv, what, m=None: real([sys.executable, "-c", "raise SystemExit(1)"], what, m),
    )
    target = tmp_path / "mirror-py3.10-x"
    with pytest.raises(envmake.ServerStartError) as e:
        envmake.make_mirror(Path(sys.executable), "1.26.4", target, wanted)
    assert "tokenizers==0.0.0.dev0" in e.value.message
    assert "TRITONBUILD_EMBEDDED_PACKAGES" in e.value.hint
    assert list(tmp_path.iterdir()) == []


def test_a_version_installed_here_that_does_not_run_on_the_target_is_left_to_pip(tmp_path):
    """filelock 4.3 (Requires-Python >= 3.11) installed here: pinned for a 3.12 target, left to
    pip for a 3.10 one (the pin made the whole install impossible there)."""
    info = tmp_path / "demo-4.3.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: demo\nVersion: 4.3.2\nRequires-Python: >=3.11\n"
    )
    dist = metadata.PathDistribution(info)
    assert mirror._runs_on(dist, "3.12") and not mirror._runs_on(dist, "3.10")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 4.3.2\n")
    assert mirror._runs_on(metadata.PathDistribution(info), "3.10")  # none declared


def test_show_names_the_environment_and_the_pins_before_the_mirror_is_made(
    repo, tmp_path, monkeypatch
):
    monkeypatch.setenv("TRITONBUILD_ENVS_DIR", str(tmp_path / "envs"))
    (tmp_path / "envs").mkdir()
    env = _env(tmp_path, OTHER)
    monkeypatch.setattr(toolenv, "current", lambda minor=None: env)

    def make_mirror(python, numpy, target, wanted):
        (target / "site").mkdir(parents=True)
        (target / envmake.RECORD).write_text("{}")

    monkeypatch.setattr(envmake, "make_mirror", make_mirror)
    shown = toolenv.summary(make=False, minor=OTHER, sources=(repo,))
    assert shown["path"] == str(env.path) and shown["mirror_path"] is None
    assert any(each.startswith("tokenizers==") for each in shown["mirrored"])
    assert shown["not_installed_here"] == ["not_a_package_anywhere (tok/1/model.py:15)"]
    made = toolenv.summary(make=True, progress=lambda _: None, minor=OTHER, sources=(repo,))
    assert made["made"] and made["mirror_path"].endswith("/site")
    again = toolenv.summary(make=False, minor=OTHER, sources=(repo,))
    assert not again["made"] and again["mirror_path"] == made["mirror_path"]


def _installed(site: Path, name: str, module: str, direct_url: dict | None) -> None:
    """A distribution as pip leaves it in site-packages: its module and its dist-info."""
    (site / module).mkdir(parents=True)
    (site / module / "__init__.py").write_text("")
    info = site / f"{name.replace('-', '_')}-0.3.dev4+gabc.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.3.dev4+gabc\n")
    (info / "top_level.txt").write_text(f"{module}\n")
    (info / "RECORD").write_text(f"{module}/__init__.py,,\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))


def test_your_own_library_installed_from_a_checkout_or_git_is_installed_from_there(
    tmp_path, monkeypatch
):
    """A model importing the team's library, installed here editable from a checkout or from git:
    no index holds 0.3.dev4+gabc, so the target gets it from where it came."""
    site = tmp_path / "site"
    _installed(
        site,
        "team-lib",
        "team_lib",
        {"url": "file:///src/team-lib", "dir_info": {"editable": True}},
    )
    _installed(
        site,
        "team-tools",
        "team_tools",
        {
            "url": "https://git.example/tools.git",
            "vcs_info": {"vcs": "git", "commit_id": "0123abc"},
        },
    )
    _installed(site, "team-plain", "team_plain", None)
    monkeypatch.syspath_prepend(str(site))
    model = tmp_path / "repo" / "m" / "1"
    model.mkdir(parents=True)
    (model / "model.py").write_text("import team_lib\nimport team_tools\nimport team_plain\n")
    got = mirror.mirror_of([tmp_path / "repo"], OTHER)
    assert got.requirements == (
        "team-lib @ file:///src/team-lib",
        "team-plain==0.3.dev4+gabc",
        "team-tools @ git+https://git.example/tools.git@0123abc",
    )
    # as pip reads a requirement (its own vendored PEP 508 parser): the URL forms are direct references
    from pip._vendor.packaging.requirements import Requirement as PipRequirement

    read = [PipRequirement(each) for each in got.requirements]
    assert [r.url for r in read] == [
        "file:///src/team-lib",
        None,
        "git+https://git.example/tools.git@0123abc",
    ]
    assert str(read[1].specifier) == "==0.3.dev4+gabc"


def test_a_large_mirror_is_not_made_on_the_fly_when_a_limit_is_set(repo, tmp_path, monkeypatch):
    """A recipe's image (not asked for) does not pull GBs (a PyPI torch for another Python is CUDA
    wheels) during a verify: over the limit it is an error naming the command that installs it,
    which the launcher turns into a fallback with the reason; without a limit it is made."""
    monkeypatch.setenv("TRITONBUILD_ENVS_DIR", str(tmp_path / "envs"))
    (tmp_path / "envs").mkdir()
    made = []
    monkeypatch.setattr(
        envmake,
        "make_mirror",
        lambda python, numpy, target, wanted: (
            made.append(target)
            or (target / "site").mkdir(parents=True)
            or (target / envmake.RECORD).write_text("{}")
        ),
    )
    env = _env(tmp_path, OTHER)
    wanted = toolenv.mirror_for(OTHER, (repo,))
    assert wanted.size > 10_000_000  # tokenizers alone is ~12 MB installed
    with pytest.raises(envmake.ServerStartError) as e:
        toolenv._with_mirror(env, (repo,), lambda _: None, at_most=wanted.size - 1)
    assert "not installed for Python" in e.value.message and made == []
    assert f"tritonbuild embedded install --for {repo}" in e.value.hint
    lines = []
    assert toolenv._with_mirror(env, (repo,), lines.append, at_most=wanted.size).mirror
    assert "MB as installed here" in lines[0] and len(made) == 1
