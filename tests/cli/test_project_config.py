"""The project config file (builder/cli/config.py): tritonbuild.toml or pyproject.toml's [tool.tritonbuild] in the
current directory or a parent gives the defaults of target, endpoint-url, cache-dir, cache-url, triton-image and
image; a flag (or the environment variable an option reads) beats it; a bad value or an unknown key is a usage
error (exit 2) naming file:line."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from tritonbuild.cli import config, main


@pytest.fixture
def project(tmp_path, monkeypatch):
    """project(text, name=...) writes the config file in tmp_path/proj and runs the CLI from its subdirectory."""
    root = tmp_path / "proj"
    (root / "sub").mkdir(parents=True)
    monkeypatch.chdir(root / "sub")

    def write(text: str, name: str = "tritonbuild.toml"):
        path = root / name
        path.write_text(textwrap.dedent(text).lstrip())
        return path

    return write


def test_a_target_from_the_file_is_used_and_a_flag_overrides_it(project, cli, tmp_path):
    (tmp_path / "from-file").mkdir()
    (tmp_path / "from-flag").mkdir()
    project(f'target = "file://{tmp_path}/from-file"\n')
    r = cli("ls", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["target"] == f"file://{tmp_path}/from-file"
    r = cli("ls", f"file://{tmp_path}/from-flag", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["target"] == f"file://{tmp_path}/from-flag"


def test_pyproject_tool_table_in_a_parent_is_read(project, cli, tmp_path):
    (tmp_path / "pub").mkdir()
    project(
        f"""
        [project]
        name = "models"

        [tool.tritonbuild]
        target = "file://{tmp_path}/pub"
        """,
        name="pyproject.toml",
    )
    r = cli("ls", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["target"] == f"file://{tmp_path}/pub"


def test_cache_dir_from_the_file_is_relative_to_it_and_flag_and_env_beat_it(
    project, cli, tmp_path, monkeypatch
):
    path = project('cache-dir = "build-cache"\n')
    monkeypatch.delenv("TRITONBUILD_CACHE_DIR")
    r = cli("cache", "ls", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["cache"] == str(path.parent / "build-cache")
    for args in (
        ["--cache-dir", tmp_path / "flag"],
        ["cache", "ls", "--cache-dir", tmp_path / "flag"],
    ):
        args = [*args, "cache", "ls", "--json"] if args[0] == "--cache-dir" else [*args, "--json"]
        r = cli(*args)
        assert json.loads(r.stdout)["cache"] == str(tmp_path / "flag"), args
    monkeypatch.setenv("TRITONBUILD_CACHE_DIR", str(tmp_path / "env"))
    r = cli("cache", "ls", "--json")
    assert json.loads(r.stdout)["cache"] == str(tmp_path / "env")


def test_the_keys_reach_the_options_they_name():
    found = config.ProjectConfig(
        path=None,
        values={
            "target": "s3://b/p",
            "endpoint-url": "http://127.0.0.1:9000",
            "triton-image": "25.01-py3",
            "image": "registry/triton:1",
            "cache-url": "s3://b/cache",
        },
    )
    defaults = config.default_map(found, main)
    assert defaults["publish"] == {"target": "s3://b/p", "endpoint_url": "http://127.0.0.1:9000"}
    assert defaults["ls"] == {"target": "s3://b/p", "endpoint_url": "http://127.0.0.1:9000"}
    # TARGET before MODEL: the file cannot fill it without taking MODEL's place
    assert defaults["rollback"] == {"endpoint_url": "http://127.0.0.1:9000"}
    # deploy-snippets' --endpoint-url is the cluster's address, never this machine's
    assert defaults["deploy-snippets"] == {"target": "s3://b/p", "image": "registry/triton:1"}
    assert defaults["build"]["triton_image"] == "25.01-py3"
    assert defaults["build"]["cache_url"] == "s3://b/cache"
    assert defaults["embedded"]["install"] == {"triton_image": "25.01-py3"}


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("# the project\ntarget = 3\n", 2, "target = 3: expected a non-empty string"),
        ('image = ""\n', 1, "expected a non-empty string"),
        ('target = "s3://b/p"\n\n[publish]\nkeep = 3\n', 3, "unknown key 'publish'"),
        ('target = "s3://b/p"\nendpoint = "http://x"\n', 2, "unknown key 'endpoint'"),
        ('target = "s3://b/p\n', 1, "not valid TOML"),
    ],
)
def test_a_bad_file_is_a_usage_error_with_file_and_line(project, cli, text, line, message):
    path = project(text)
    r = cli("ls")
    assert r.exit_code == 2
    assert f"{path}:{line}" in r.stderr and message in r.stderr, r.stderr
    assert "Traceback" not in r.output
    r = cli("ls", "--json")
    error = json.loads(r.stdout)
    assert (error["exit_code"], error["where"]) == (2, f"{path}:{line}")
    assert cli("ls", "--help").exit_code == 0  # help stays reachable


def test_an_unknown_key_in_pyproject_names_its_line_and_the_close_key(project, cli):
    path = project(
        """
        [project]
        name = "models"

        [tool.tritonbuild]
        target = "s3://b/p"
        endpoint_url = "http://minio:9000"
        """,
        name="pyproject.toml",
    )
    r = cli("ls")
    assert r.exit_code == 2
    assert f"{path}:6: unknown key 'endpoint_url'" in r.stderr
    assert "did you mean 'endpoint-url'" in r.stderr


def test_a_subtable_in_pyproject_is_refused_at_its_header(project, cli):
    path = project(
        '[tool.tritonbuild]\ntarget = "s3://b/p"\n\n[tool.tritonbuild.publish]\nkeep = 3\n',
        name="pyproject.toml",
    )
    r = cli("ls")
    assert r.exit_code == 2
    assert f"{path}:4: unknown key 'publish'" in r.stderr


def test_a_pyproject_without_the_table_is_passed_over(project, cli, tmp_path):
    (tmp_path / "outer").mkdir()
    project(f'target = "file://{tmp_path}/outer"\n')
    (tmp_path / "proj" / "sub" / "pyproject.toml").write_text('[project]\nname = "x"\n')
    r = cli("ls", "--json")
    assert json.loads(r.stdout)["target"] == f"file://{tmp_path}/outer"


def test_the_documented_examples_load_as_written(tmp_path):
    """docs/howto/config.md's TOML blocks are real config files: each loads, every key known."""
    from tests.conftest import ROOT

    page = (ROOT / "docs" / "howto" / "config.md").read_text()
    examples = re.findall(r"```toml\n(.*?)```", page, re.S)
    assert len(examples) == 2
    for number, text in enumerate(examples):
        folder = tmp_path / str(number)
        folder.mkdir()
        name = "pyproject.toml" if "[tool.tritonbuild]" in text else "tritonbuild.toml"
        (folder / name).write_text(text)
        found = config.load(folder)
        assert found is not None and found.path == folder / name
        assert set(found.values) == set(re.findall(r"^([a-z-]+) =", text, re.M))


def test_publish_out_goes_to_the_files_target_and_a_target_argument_beats_it(
    project, cli, tmp_path
):
    from tests.cli.test_publish import _fake_verified
    from tests.conftest import PY_MODEL, PY_RECIPE

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "model.py").write_text(PY_MODEL)
    (tmp_path / "src" / "r.yaml").write_text(PY_RECIPE.lstrip())
    out = tmp_path / "OUT"
    assert cli("build", tmp_path / "src" / "r.yaml", "-o", out).exit_code == 0
    _fake_verified(cli, out)
    for name in ("prod", "staging"):
        (tmp_path / name).mkdir()
    project(f'target = "file://{tmp_path}/prod"\n')
    r = cli("publish", out, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["target"] == f"file://{tmp_path}/prod"
    assert (tmp_path / "prod" / "tritonbuild-manifest.json").is_file()
    r = cli("publish", out, f"file://{tmp_path}/staging", "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["target"] == f"file://{tmp_path}/staging"
