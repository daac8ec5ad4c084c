"""The CLI hands --tritonserver and --triton-image to the api as one ServingTarget, and the api hands
the same object to the stage (verify, serve, tune, infer, build, embedded): recorded where the
stage is called."""

from __future__ import annotations

import pytest

from tests.conftest import EXAMPLES
from tritonbuild import api
from tritonbuild.api import building, checking, maintenance, serving, tuning

BINARY = "/opt/tritonserver/bin/tritonserver"
RECIPE = EXAMPLES / "feature-normalizer.yaml"


class Reached(Exception):
    """Raised by a stand-in stage once it has recorded what it was given."""


@pytest.fixture
def given(monkeypatch):
    """Each stage function, replaced by one that records its serving target and stops."""
    seen = {}

    def stand_in(name):
        def record(*_args, **kwargs):
            seen[name] = kwargs.get("serving")
            raise Reached(name)

        return record

    monkeypatch.setattr(checking, "verify", stand_in("verify"))
    monkeypatch.setattr(checking, "_infer", stand_in("infer"))
    monkeypatch.setattr(tuning, "_tune", stand_in("tune"))
    monkeypatch.setattr(tuning, "recipe_for", lambda *_: (None, None))
    monkeypatch.setattr(tuning, "with_flags", lambda spec, **_: spec)
    monkeypatch.setattr(maintenance, "environment_summary", stand_in("embedded"))
    monkeypatch.setattr(serving, "_hand_written", lambda *_: (_ for _ in ()).throw(Reached()))
    monkeypatch.setattr(building, "syntax_python", lambda target: stand_in("build")(serving=target))
    return seen


@pytest.mark.parametrize(
    ("args", "stage", "expected"),
    [
        (
            ["verify", "{dir}", "--tritonserver", BINARY, "--triton-image", "25.01-py3"],
            "verify",
            api.ServingTarget(BINARY, "25.01-py3"),
        ),
        (["verify", "{dir}"], "verify", api.ServingTarget()),
        (["infer", "{dir}", "m", "--tritonserver", BINARY], "infer", api.ServingTarget(BINARY)),
        (["tune", "{dir}", "m", "--tritonserver", BINARY], "tune", api.ServingTarget(BINARY)),
        (
            ["validate", "{recipe}", "--triton-image", "24.10-py3"],
            "build",
            api.ServingTarget(triton_image="24.10-py3"),
        ),
        (
            ["build", "{recipe}", "-o", "{dir}/out", "--triton-image", "24.10-py3"],
            "build",
            api.ServingTarget(triton_image="24.10-py3"),
        ),
        (
            ["embedded", "show", "--triton-image", "24.10-py3"],
            "embedded",
            api.ServingTarget(triton_image="24.10-py3"),
        ),
    ],
)
def test_the_cli_passes_one_serving_target_to_the_stage(
    given, cli, tmp_path, args, stage, expected
):
    (tmp_path / "m").mkdir()
    done = cli(*(a.format(dir=tmp_path, recipe=RECIPE) for a in args))
    assert f"Reached: {stage}" in done.stderr  # the stand-in stopped the command, as a bug would
    assert given[stage] == expected and isinstance(given[stage], api.ServingTarget)


def test_serve_launches_for_the_target_it_was_given(monkeypatch, tmp_path):
    """serve: the launcher is asked for the given tritonserver and the given image's Python."""
    asked = []
    monkeypatch.setattr(serving, "launcher_for", lambda given, sources: asked.append(given))
    monkeypatch.setattr(serving, "_hand_written", lambda root, options: options["launcher"])
    (tmp_path / "m").mkdir()
    target = api.ServingTarget(BINARY, "25.01-py3")
    api.serve(tmp_path, serving=target)
    assert asked == [target] and asked[0].target.python == "3.12"
