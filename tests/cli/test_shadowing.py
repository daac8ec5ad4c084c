"""A user's own `tritonbuild/` or `builder/` folder (or a module named like an installed one) beside
the recipe must not shadow our packages in the export subprocess."""

import subprocess
import sys

import pytest

from tritonbuild.core.proc import python_module_argv

POISON = "raise SystemExit('the user folder shadowed an installed package')\n"
MODEL = """
import torch


def build_model():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 2)
"""


def _poison(tmp_path):
    for pkg in ("tritonbuild", "builder", "numpy"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text(POISON)


def test_module_argv_keeps_the_cwd_off_sys_path(tmp_path):
    _poison(tmp_path)
    argv = python_module_argv(
        "tritonbuild.core.proc"
    )  # a module that runs as __main__ and does nothing
    res = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert (
        subprocess.run(
            [sys.executable, "-m", "tritonbuild.core.proc"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        ).returncode
        != 0
    )  # the plain form is shadowed: the test can fail


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["onnxruntime", "pytorch"])
def test_export_with_user_folders_named_like_our_packages(cli, write, tmp_path, backend):
    _poison(tmp_path)
    write("net.py", MODEL)
    p = write(
        "r.yaml",
        f"name: t\nversion: 1\nbackend: {backend}\nsource:\n  export:\n    module: 'net:build_model'\n"
        "    inputs: {x: {dtype: fp32, shape: [2, 3]}}\n    outputs: [y]\nmax_batch_size: 2\n",
    )
    r = cli("build", p, "-o", tmp_path / "OUT")
    assert r.exit_code == 0, r.stderr


@pytest.mark.slow
def test_module_named_like_an_installed_one_is_a_clear_error(cli, write, tmp_path):
    write("json.py", MODEL)
    p = write(
        "r.yaml",
        "name: t\nversion: 1\nbackend: onnxruntime\nsource:\n  export:\n"
        "    module: 'json:build_model'\n"
        "    inputs: {x: {dtype: fp32, shape: [2, 3]}}\n    outputs: [y]\nmax_batch_size: 2\n",
    )
    r = cli("build", p, "-o", tmp_path / "OUT")
    assert r.exit_code == 5 and "an installed module has that name; rename your module" in r.stderr


@pytest.mark.slow
def test_export_from_a_relative_recipe_path(cli, write, tmp_path, monkeypatch):
    """The module's directory reaches the subprocess absolute (it no longer relies on the cwd being on sys.path)."""
    write("models/net.py", MODEL)
    write(
        "models/r.yaml",
        "name: t\nversion: 1\nbackend: pytorch\nsource:\n  export:\n    module: 'net:build_model'\n"
        "    inputs: {x: {dtype: fp32, shape: [2, 3]}}\n    outputs: [y]\nmax_batch_size: 2\n",
    )
    monkeypatch.chdir(tmp_path)
    r = cli("build", "models/r.yaml", "-o", "OUT")
    assert r.exit_code == 0, r.stderr
