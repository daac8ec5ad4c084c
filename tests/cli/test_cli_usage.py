"""Daily-use CLI behaviour: wrong paths, empty targets, unknown recipe keys, tables in logs."""

import json

import pytest


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "{missing}"],
        ["serve", "{missing}"],
        ["publish", "{missing}", "file://{tmp}/target"],
        ["deploy-snippets", "{missing}", "--image", "img"],
    ],
)
def test_wrong_path_is_a_usage_error_saying_no_such_directory(cli, tmp_path, args):
    argv = [a.format(missing=tmp_path / "nope", tmp=tmp_path) for a in args]
    r = cli(*argv)
    assert r.exit_code == 2, r.stderr
    assert (
        f"no such directory: {tmp_path / 'nope'}" in r.stderr
        and "not a tritonbuild repository" not in r.stderr
    )
    r = cli(*argv, "--json")
    assert r.exit_code == 2 and json.loads(r.stdout)["error"] == "usage"


def test_ls_of_an_empty_prefix_says_nothing_published_here(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    r = cli("ls", f"file://{tmp_path / 'empty'}")
    assert r.exit_code == 0 and "nothing published here" in r.stdout


def test_unknown_recipe_keys_get_did_you_mean_and_point_to_tritonbuild_schema(cli, write):
    write("model.py", "")
    p = write(
        "r.yaml",
        "name: x\nversion: 1\nbackend: python\nsource: {path: model.py, filez: [a]}\n"
        "max_batchsize: 4\ninputs: [{name: X, dtype: fp32, dims: [3], optinal: true}]\n"
        "outputs: [{name: Y, dtype: fp32, dims: [3]}]\n",
    )
    r = cli("validate", p)
    assert r.exit_code == 3
    assert "did you mean 'files'?" in r.stderr
    assert "did you mean 'max_batch_size'?" in r.stderr
    assert "did you mean 'optional'?" in r.stderr
    assert "tritonbuild schema" in r.stderr and "recipe.schema.json" not in r.stderr


def test_long_rows_become_whole_lines_instead_of_truncated_cells(cli, py_recipe, tmp_path):
    name = "a-model-name-long-enough-that-the-table-is-wider-than-80-columns"
    py_recipe.write_text(py_recipe.read_text().replace("name: doubler", f"name: {name}"))
    r = cli("build", py_recipe, "-o", tmp_path / "OUT")
    assert r.exit_code == 0, r.stderr
    assert "…" not in r.stdout and f"model={name}" in r.stdout
    r = cli("cache", "ls")
    assert r.exit_code == 0 and "…" not in r.stdout


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_infer_and_status_have_exit_codes_of_their_own():
    """issue 31.4 (6): serve, infer and status failures exited 6, as a failed verify does."""
    from tritonbuild import errors

    codes = {
        cls.__name__: cls.exit_code
        for cls in vars(errors).values()
        if isinstance(cls, type)
        and issubclass(cls, errors.TritonBuildError)
        and cls is not errors.MultipleErrors
    }
    assert (codes["ServerError"], codes["InferenceError"]) == (8, 9)
    assert len(set(codes.values())) == len(codes), codes  # no two stages share a code
    assert codes["VerifyError"] == 6 and codes["PublishError"] == 7


@pytest.mark.parametrize(
    ("command", "code", "kind"), [("status", 8, "server"), ("infer", 9, "infer")]
)
def test_an_unreachable_server_is_the_commands_own_exit_code(cli, command, code, kind):
    url = f"http://127.0.0.1:{_closed_port()}"
    argv = [command, url] + (["m"] if command == "infer" else [])
    r = cli(*argv)
    assert r.exit_code == code and "cannot reach" in r.stderr, r.stderr
    r = cli(*argv, "--json")
    assert r.exit_code == code and json.loads(r.stdout)["error"] == kind, r.stdout
