"""Messages that say what happened (issue 43, item 5): a reader that left ('tritonbuild … | head') is no bug, and a URL
given where a local directory is needed is called a URL."""

from __future__ import annotations

import io
import os
import sys

import pytest


def test_a_reader_that_left_ends_the_command_quietly(monkeypatch, capfd):
    from tritonbuild.cli import main

    read, write = os.pipe()
    os.close(read)  # the reader ('head') is gone: every write fails with EPIPE
    stdout = io.TextIOWrapper(io.FileIO(write, "w"), write_through=False)
    monkeypatch.setattr(sys, "stdout", stdout)
    try:
        with pytest.raises(SystemExit) as exited:
            main.main(["schema"])
    finally:
        monkeypatch.undo()
    assert exited.value.code == 141
    assert "bug" not in capfd.readouterr().err


def test_goldens_from_a_url_says_it_is_a_url(cli):
    """Issue 43: '--goldens s3://…' said 'no such directory: s3:/…' (the URL folded into a path)."""
    r = cli("infer", "http://127.0.0.1:9", "doubler", "--goldens", "s3://bucket/repo")
    assert r.exit_code == 2, r.output
    assert "s3://bucket/repo is a URL" in r.stderr and "no such directory" not in r.stderr
    assert "aws s3 sync s3://bucket/repo DIR" in r.stderr


@pytest.mark.parametrize(
    ("model_py", "exit_code", "said"),
    [
        (None, 4, "source.path: source file not found"),
        ("def execute(:\n", 5, "model.py:1:13: SyntaxError: invalid syntax"),
    ],
)
def test_validate_refuses_what_build_refuses(cli, write, tmp_path, model_py, exit_code, said):
    """Issue 43: 'validate' said ok for a recipe whose source file is missing or whose model.py does not parse,
    which build then refused; it runs build's checks before building (the plan), with build's exit codes, and
    says the file's place once (it was 'model.py:1:13: model.py:1:13: SyntaxError')."""
    from tests.conftest import PY_RECIPE

    recipe = write("r.yaml", PY_RECIPE)
    if model_py is not None:
        write("model.py", model_py)
    outcomes = [
        cli(command, recipe, *extra)
        for command, *extra in (("validate",), ("build", "-o", tmp_path / "OUT"))
    ]
    for r in outcomes:
        assert r.exit_code == exit_code, r.output
        assert said in r.stderr and "ok  " not in r.stdout, r.stderr
        located = r.stderr.split("): ", 1)[1].split(" SyntaxError")[0]
        assert located.count("model.py") <= 1, r.stderr
    assert not (tmp_path / "OUT").exists()


ENSEMBLE = """
name: twice
version: 1
backend: ensemble
max_batch_size: 4
inputs: [{name: IN, dtype: fp32, dims: [3]}]
outputs: [{name: OUT, dtype: fp32, dims: [3]}]
steps:
  - model: doubler
    inputs: {X: IN}
    outputs: {Y: mid}
  - model: doubler
    inputs: {X: mid}
    outputs: {Y: OUT}
"""


def test_serve_lists_an_ensemble_as_loaded_with_its_steps(cli, write, tmp_path):
    """Issue 43: serving a published target (or a hand-written repository) listed an ensemble 'not loaded' (it has
    no backend of its own) while Triton had it READY. An ensemble is loaded when every step is."""
    import shutil

    from tests.conftest import PY_MODEL, PY_RECIPE
    from tritonbuild import api

    write("model.py", PY_MODEL)
    recipes = [write("doubler.yaml", PY_RECIPE), write("twice.yaml", ENSEMBLE)]
    out = tmp_path / "OUT"
    assert cli("build", *recipes, "-o", out).exit_code == 0
    target = f"file://{tmp_path}/pub"
    assert cli("publish", out, target, "--skip-verify").exit_code == 0
    plain = tmp_path / "plain"
    shutil.copytree(out, plain, ignore=shutil.ignore_patterns("tritonbuild-*.json"))
    for where in (target, plain):
        planned = api.serve(where)
        assert sorted(planned.loadable) == ["doubler", "twice"], where
        assert planned.not_loadable == [], where
    shutil.rmtree(plain / "doubler")  # a step that is not there: its ensemble cannot load
    assert api.serve(plain).not_loadable == ["twice"]


def test_a_refused_endpoint_is_not_reported_as_a_deadline(cli, write, tmp_path, monkeypatch):
    """Issue 43: an S3 endpoint that refused the connection (nothing listening) failed in ~2 s and was reported as
    'no answer within the 30 s network deadline', with a hint to lengthen the deadline. A refusal says so."""
    import socket
    import time

    from tests.conftest import PY_MODEL, PY_RECIPE

    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for name, value in {
        "AWS_ACCESS_KEY_ID": "AKIATRITONBUILDFAKE1",
        "AWS_SECRET_ACCESS_KEY": "fake",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
    }.items():
        monkeypatch.setenv(name, value)
    write("model.py", PY_MODEL)
    out = tmp_path / "OUT"
    assert cli("build", write("r.yaml", PY_RECIPE), "-o", out).exit_code == 0
    started = time.monotonic()
    r = cli("publish", out, "s3://bucket/models", "--skip-verify")
    assert r.exit_code == 7, r.output
    assert time.monotonic() - started < 30
    assert "did not take the connection (refused or unreachable)" in r.stderr, r.stderr
    assert "no answer within" not in r.stderr and "longer deadline" not in r.stderr
