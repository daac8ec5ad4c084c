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
