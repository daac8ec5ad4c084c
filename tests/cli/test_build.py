"""Bad input: a clear message, its exit code, and nothing written to OUT."""

from __future__ import annotations

import json

import pytest

from tests.conftest import PY_RECIPE


def test_validate_ok(cli, py_recipe):
    r = cli("validate", py_recipe)
    assert r.exit_code == 0
    assert r.stdout == f"ok  {py_recipe}  (doubler v1, python)\n"


def test_bad_recipe_exit_3_with_location_and_nothing_written(cli, write, tmp_path):
    p = write("bad.yaml", PY_RECIPE + "colour: blue\n")
    out = tmp_path / "OUT"
    r = cli("build", p, "-o", out)
    assert r.exit_code == 3
    assert f"{p}:9: colour: unknown key" in r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()


def test_json_error_output(cli, write, tmp_path):
    p = write("bad.yaml", PY_RECIPE.replace("version: 1", "version: 0"))
    r = cli("validate", p, "--json")
    assert r.exit_code == 3
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == 3 and doc["error"] == "recipe" and doc["where"] == f"{p}:2"


def test_missing_source_file_exit_4(cli, write, tmp_path):
    p = write("r.yaml", PY_RECIPE.replace("path: model.py", "path: nowhere.py"))
    r = cli("build", p, "-o", tmp_path / "OUT")
    assert r.exit_code == 4, r.stderr
    assert "source file not found" in r.stderr and f"{p}:4" in r.stderr
    assert not (tmp_path / "OUT").exists()


def test_sha256_pin_mismatch_exit_4(cli, write, tmp_path):
    write("model.py", "x = 1\n")
    p = write("r.yaml", PY_RECIPE.replace("path: model.py", "path: model.py, sha256: " + "ab" * 32))
    r = cli("build", p, "-o", tmp_path / "OUT")
    assert r.exit_code == 4
    assert "the recipe pins abab" in r.stderr and "update source.sha256" in r.stderr
    assert not (tmp_path / "OUT").exists()


def test_onnx_file_that_is_not_onnx_exit_5(cli, write, tmp_path):
    write("model.onnx", b"this is not a protobuf\x00\xff")
    p = write("r.yaml", "name: enc\nversion: 1\nbackend: onnxruntime\nsource: {path: model.onnx}\n")
    r = cli("build", p, "-o", tmp_path / "OUT")
    assert r.exit_code == 5
    assert "is not a valid ONNX model" in r.stderr
    assert not (tmp_path / "OUT").exists()


def test_model_py_syntax_error_exit_5_at_its_line(cli, py_recipe, write, tmp_path):
    """A syntax error in model.py surfaced only at verify (a load error); the build stops at its file:line."""
    write("model.py", "import numpy as np\n\n\ndef broken(:\n    pass\n")
    r = cli("build", py_recipe, "-o", tmp_path / "OUT")
    assert r.exit_code == 5, r.stderr
    assert f"{tmp_path / 'model.py'}:4" in r.stderr and "SyntaxError: invalid syntax" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "OUT").exists()


def test_model_py_with_a_nul_byte_is_a_build_error_not_a_traceback(cli, py_recipe, write, tmp_path):
    """Python 3.10/3.11 refuse NUL bytes with a ValueError (3.12: a SyntaxError): the syntax check at
    planning (in-process or by the target's Python) reports both as the file's build error."""
    write("model.py", "import numpy as np\x00\n")
    r = cli("build", py_recipe, "-o", tmp_path / "OUT")
    assert r.exit_code == 5, r.stderr
    assert "model.py" in r.stderr and "null bytes" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "OUT").exists()


def _target_pythons() -> None:
    from tritonbuild.errors import ServerStartError
    from tritonbuild.server import toolenv

    try:
        toolenv.find_python("3.10"), toolenv.find_python("3.12")
    except ServerStartError:
        pytest.skip("needs Python 3.10 and 3.12 (PATH or pyenv)")


def test_model_py_syntax_is_checked_by_the_target_images_python(cli, py_recipe, write, tmp_path):
    """A model.py valid on 3.12 only (a PEP 695 alias) was refused by a build on 3.10/3.11 whatever
    image served it; --triton-image checks with that image's Python, at planning, so a cached step
    is checked again for another image."""
    import sys

    _target_pythons()
    write("model.py", "type Scale = float\n\n\nclass TritonPythonModel:\n    pass\n")
    out = tmp_path / "OUT"
    r = cli("build", py_recipe, "-o", out, "--triton-image", "25.01-py3")
    assert r.exit_code == 0, r.stderr
    r = cli("build", py_recipe, "-o", out, "--triton-image", "24.10-py3")
    assert r.exit_code == 5 and f"{tmp_path / 'model.py'}:1" in r.stderr, r.stderr
    assert "checked with Python 3.10, the target image's (--triton-image)" in r.stderr
    assert (out / "doubler" / "1" / "model.py").is_file()  # the earlier build kept
    if sys.version_info < (3, 12):
        r = cli("build", py_recipe, "-o", tmp_path / "HERE")
        assert r.exit_code == 5 and "--triton-image checks with the Python" in r.stderr


def test_out_exists_and_is_not_a_repository(cli, py_recipe, tmp_path):
    out = tmp_path / "OUT"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    r = cli("build", py_recipe, "-o", out)
    assert r.exit_code == 2
    assert "is not a tritonbuild repository" in r.stderr and "--force" in r.stderr
    assert (out / "precious.txt").read_text() == "keep me"
    assert cli("build", py_recipe, "-o", out, "--force").exit_code == 0
    assert not (out / "precious.txt").exists()


def test_rebuild_replaces_repository_and_reuses_cache(cli, py_recipe, tmp_path):
    out = tmp_path / "OUT"
    first = cli("build", py_recipe, "-o", out, "--json")
    second = cli("build", py_recipe, "-o", out, "--json")
    assert first.exit_code == second.exit_code == 0
    s1, s2 = json.loads(first.stdout), json.loads(second.stdout)
    assert s2["models"][0]["steps"][0]["status"] == "cached"
    assert s1["manifest_digest"] == s2["manifest_digest"]
    assert sorted(p.name for p in out.iterdir()) == ["doubler", "tritonbuild-manifest.json"]


def test_duplicate_name_and_version_exit_3(cli, py_recipe, write, tmp_path):
    write("copy.yaml", PY_RECIPE)
    r = cli("build", tmp_path, "-o", tmp_path / "OUT")
    assert r.exit_code == 3 and "is also defined in" in r.stderr


def test_plan_json(cli, py_recipe):
    r = cli("plan", py_recipe, "--json")
    assert r.exit_code == 0
    plan = json.loads(r.stdout)
    (m,) = plan["models"]
    assert m["name"] == "doubler" and m["steps"][0]["kind"] == "python.package"
    # the build's toolchain: what steps key on (the embedded server lives in an environment of its own)
    assert len(m["steps"][0]["cache_key"]) == 64 and {"tritonbuild", "python", "numpy"} <= set(
        plan["toolchain"]
    )


def test_cache_key_changes_with_input(cli, py_recipe, write):
    k1 = json.loads(cli("plan", py_recipe, "--json").stdout)["models"][0]["steps"][0]["cache_key"]
    write("model.py", "# changed\n")
    k2 = json.loads(cli("plan", py_recipe, "--json").stdout)["models"][0]["steps"][0]["cache_key"]
    assert k1 != k2


def test_onnx_recipe_contradicting_graph_names_both(cli, write, tmp_path):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "relu.onnx")
    p = write(
        "r.yaml",
        "name: relu\nversion: 1\nbackend: onnxruntime\nsource: {path: relu.onnx}\n"
        "max_batch_size: 2\ninputs: [{name: x, dtype: int64, dims: [4]}]\n",
    )
    r = cli("build", p, "-o", tmp_path / "OUT")
    assert r.exit_code == 5
    assert "inputs 'x': recipe says int64, the ONNX graph says fp32" in r.stderr
    p = write(
        "r.yaml",
        "name: relu\nversion: 1\nbackend: onnxruntime\nsource: {path: relu.onnx}\n"
        "max_batch_size: 2\n",
    )
    assert cli("build", p, "-o", tmp_path / "OUT").exit_code == 0
    cfg = (tmp_path / "OUT" / "relu" / "config.pbtxt").read_text()
    assert 'platform: "onnxruntime_onnx"' in cfg and "dims: 4" in cfg


@pytest.mark.parametrize("command", ["verify", "serve"])
def test_not_a_repository(cli, command, tmp_path):
    """An existing directory without a manifest (a missing one is a usage error: tests/cli/test_cli_usage.py)."""
    r = cli(command, tmp_path)
    assert r.exit_code == 6 and "is not a tritonbuild repository" in r.stderr


def test_two_versions_of_one_model(cli, py_recipe, write, tmp_path):
    write("v2.yaml", PY_RECIPE.replace("version: 1", "version: 2"))
    out = tmp_path / "OUT"
    r = cli("build", tmp_path / "doubler.yaml", tmp_path / "v2.yaml", "-o", out)
    assert r.exit_code == 0, r.stderr
    assert (out / "doubler" / "1" / "model.py").is_file() and (
        out / "doubler" / "2" / "model.py"
    ).is_file()
    write(
        "v2.yaml",
        PY_RECIPE.replace("version: 1", "version: 2").replace(
            "max_batch_size: 4", "max_batch_size: 2"
        ),
    )
    r = cli("build", tmp_path / "doubler.yaml", tmp_path / "v2.yaml", "-o", out)
    assert r.exit_code == 5 and "need different config.pbtxt" in r.stderr
    assert (out / "doubler" / "2" / "model.py").is_file()  # the previous repository is untouched


UNTRACEABLE = """
import torch


class Branchy(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow: fine for trace (one branch), impossible for onnx dims
            return x * 2
        return x


class NotAModule:
    pass


def good():
    return Branchy()


def bad():
    return NotAModule()


def broken():
    raise RuntimeError("cannot build this model: weights missing")
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "function, code, words",
    [
        ("bad", 5, "returned NotAModule, not a torch.nn.Module"),
        ("broken", 5, "cannot build this model: weights missing"),
    ],
)
def test_torch_export_failures_carry_the_exporters_message(
    cli, write, tmp_path, function, code, words
):
    write("mods.py", UNTRACEABLE)
    p = write(
        "r.yaml",
        f"name: t\nversion: 1\nbackend: pytorch\nsource:\n  export:\n    module: 'mods:{function}'\n"
        "    inputs: {x: {dtype: fp32, shape: [2, 3]}}\n    outputs: [y]\nmax_batch_size: 2\n",
    )
    r = cli("build", p, "-o", tmp_path / "OUT")
    assert r.exit_code == code, r.stderr
    assert "torch export (torchscript) of mods:" in r.stderr and words in r.stderr
    assert "reproduce with" in r.stderr and not (tmp_path / "OUT").exists()


@pytest.mark.slow
def test_torchscript_names_and_script_method(cli, write, tmp_path):
    write("mods.py", UNTRACEABLE)
    p = write(
        "r.yaml",
        "name: t\nversion: 1\nbackend: pytorch\nsource:\n  export:\n    module: 'mods:good'\n"
        "    inputs: {x: {dtype: fp32, shape: [2, 3]}}\n    outputs: [y]\n    method: script\n"
        "max_batch_size: 2\n",
    )
    assert cli("build", p, "-o", tmp_path / "OUT").exit_code == 0
    from tritonbuild.triton.config import parse

    mc = parse((tmp_path / "OUT" / "t" / "config.pbtxt").read_bytes())
    assert (mc.platform, mc.input[0].name, mc.output[0].name) == (
        "pytorch_libtorch",
        "x__0",
        "y__0",
    )
    assert list(mc.input[0].dims) == [3]


@pytest.mark.slow
def test_aoti_package_builds_and_verifies_in_process(cli, tmp_path, in_root):
    """torch.export + AOTInductor (compiles C++ with the system compiler: about a minute on 2 cores)."""
    import shutil

    from tests.conftest import EXAMPLES

    shutil.copy(EXAMPLES / "embedder.py", tmp_path / "embedder.py")
    text = (
        (EXAMPLES / "image-embedder.yaml")
        .read_text()
        .replace("format: torchscript", "format: aoti")
    )
    (tmp_path / "r.yaml").write_text(text.replace("goldens/image-embedder.npz", "goldens/aoti.npz"))
    out = tmp_path / "OUT"
    r = cli("build", tmp_path / "r.yaml", "-o", out)
    assert r.exit_code == 0, r.stderr
    from tritonbuild.triton.config import parse

    mc = parse((out / "image-embedder" / "config.pbtxt").read_bytes())
    assert (mc.platform, mc.default_model_filename) == ("torch_aoti", "model.pt2")
    v = cli("verify", out, "--record", "--json")
    assert v.exit_code == 0, v.stdout
    (m,) = json.loads(v.stdout)["models"]
    assert m["path"] == "in-process" and m["passed"] and m["compared"] == 3 * 3


@pytest.mark.parametrize("key", ["inputs", "outputs"])
def test_a_tensor_name_listed_twice_is_refused_at_recipe_load(cli, write, tmp_path, key):
    write("model.py", "x = 1\n")
    line = {
        "inputs": "inputs: [{name: X, dtype: fp32, dims: [3]}]",
        "outputs": "outputs: [{name: Y, dtype: fp32, dims: [3]}]",
    }[key]
    name = line.split("name: ")[1].split(",")[0]
    twice = f"{key}:\n  - {{name: {name}, dtype: fp32, dims: [3]}}\n  - {{name: {name}, dtype: fp32, dims: [3]}}"
    p = write("dup.yaml", PY_RECIPE.replace(line, twice))
    r = cli("build", p, "-o", tmp_path / "OUT")
    assert r.exit_code == 3, r.stdout + r.stderr
    where = (
        p.read_text().splitlines().index(f"  - {{name: {name}, dtype: fp32, dims: [3]}}") + 2
    )  # the second
    assert (
        f"{p}:{where}: {key}[1].name: {key[:-1]} name '{name}' is already used by {key}[0]"
        in r.stderr
    )
    assert "fix: rename one of them" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "OUT").exists()


def test_an_extra_file_outside_the_model_directory_names_its_key(cli, write, tmp_path):
    write("r/model.py", "x = 1\n")
    write("outside/secret.txt", "s\n")
    p = write(
        "r/m.yaml",
        PY_RECIPE.replace(
            "source: {path: model.py}", 'source: {path: model.py, files: ["../outside/secret.txt"]}'
        ),
    )
    r = cli("build", p, "-o", tmp_path / "OUT")
    assert r.exit_code == 4, r.stderr
    assert f"{p}:4: source.files[0]: " in r.stderr and "is not inside" in r.stderr, r.stderr
    assert not (tmp_path / "OUT").exists()


@pytest.mark.parametrize(
    "url, words",
    [
        ("nosuch://bucket/cache", "nosuch"),
        ("https://user:hunter2@example.com/cache", "credentials"),
    ],
)
def test_a_cache_url_no_driver_serves_is_a_usage_error_before_anything_is_built(
    cli, py_recipe, tmp_path, url, words
):
    # The first build fills the local cache, so the second never needs the remote: a bad URL must still be said.
    assert cli("build", py_recipe, "-o", tmp_path / "A").exit_code == 0
    out = tmp_path / "OUT"
    r = cli("build", py_recipe, "-o", out, "--cache-url", url)
    assert r.exit_code == 2, r.stderr
    assert "--cache-url" in r.stderr and words in r.stderr and "hunter2" not in r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()
