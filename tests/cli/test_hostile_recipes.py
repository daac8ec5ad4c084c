"""Inputs and OUT: no lost user files, no writes or reads outside their roots, no hangs, no tracebacks
for hostile recipes. Each case failed (exit 0 with data lost, a traceback, or a hang) before the fix."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, PY_RECIPE


@pytest.fixture(autouse=True)
def _bounded():
    """A hang fails the test (SIGALRM interrupts a blocking open of a FIFO) instead of stalling the suite."""

    def _raise(*_):
        raise TimeoutError("the command did not end in 30 s")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _no_traceback(r):
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr


# --- 1. OUT must be provably ours ---------------------------------------------------------------------------


def test_unparsable_manifest_does_not_make_a_directory_ours(cli, py_recipe, tmp_path):
    out = tmp_path / "OUT"
    out.mkdir()
    (out / "thesis.tex").write_text("four years of work")
    (out / "tritonbuild-manifest.json").write_text("{not json")
    r = cli("build", py_recipe, "-o", out)
    assert r.exit_code == 2, r.stderr
    assert str(out) in r.stderr and "does not parse" in r.stderr and "--force" in r.stderr
    assert (out / "thesis.tex").read_text() == "four years of work"
    _no_traceback(r)


def test_a_user_file_beside_a_valid_manifest_is_not_deleted(cli, py_recipe, tmp_path):
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    (out / "doubler" / "notes.txt").write_text("mine")
    r = cli("build", py_recipe, "-o", out)
    assert r.exit_code == 2 and "doubler/notes.txt is not in its manifest" in r.stderr
    assert (out / "doubler" / "notes.txt").read_text() == "mine"
    (out / "doubler" / "notes.txt").unlink()
    (out / "mine").mkdir()
    r = cli("build", py_recipe, "-o", out)
    assert r.exit_code == 2 and "mine/ is not in its manifest" in r.stderr


def test_our_own_repository_is_replaced_also_after_verify_wrote_its_report(
    cli, py_recipe, tmp_path
):
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    (out / "tritonbuild-verification.json").write_text("{}")
    (out / "doubler" / "1" / "__pycache__").mkdir()  # what Triton's Python backend may leave
    assert cli("build", py_recipe, "-o", out).exit_code == 0


# --- 2. OUT never overlaps an input --------------------------------------------------------------------------


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_out_equal_to_the_recipe_directory_is_refused(cli, py_recipe, tmp_path, force):
    before = sorted(p.name for p in tmp_path.iterdir())
    r = cli("build", tmp_path, "-o", tmp_path, *force)
    assert r.exit_code == 2 and "overlaps" in r.stderr and "recipe" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    _no_traceback(r)


def test_out_through_a_symlink_to_the_recipes_is_refused(cli, py_recipe, tmp_path):
    link = tmp_path.parent / f"{tmp_path.name}-link"
    link.symlink_to(tmp_path)
    try:
        r = cli("build", py_recipe, "-o", link, "--force")
        assert r.exit_code == 2 and "overlaps" in r.stderr
        assert py_recipe.is_file() and (tmp_path / "model.py").is_file()
    finally:
        link.unlink()


def test_out_holding_the_recipes_or_inside_the_cache_is_refused(cli, write, tmp_path):
    write("proj/model.py", "x = 1\n")
    recipe = write("proj/recipes/doubler.yaml", PY_RECIPE.replace("model.py", "../model.py"))
    r = cli("build", recipe, "-o", tmp_path / "proj", "--force")
    assert r.exit_code == 2 and "overlaps" in r.stderr and recipe.is_file()
    cache = Path(os.environ["TRITONBUILD_CACHE_DIR"])
    r = cli("build", recipe, "-o", cache / "out")
    assert r.exit_code == 2 and "the build cache" in r.stderr


def test_out_equal_to_a_source_directory_is_refused(cli, write, tmp_path):
    write("src/model.py", "x = 1\n")
    recipe = write("recipes/doubler.yaml", PY_RECIPE.replace("model.py", "../src/model.py"))
    r = cli("build", recipe, "-o", tmp_path / "src", "--force")
    assert r.exit_code == 2 and "a source of 'doubler'" in r.stderr
    assert (tmp_path / "src" / "model.py").is_file()


# --- 3. names and paths stay inside their roots ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["../../../x", "/tmp/x", "a/b", "..", "x\\\\y", "X\\n"])
def test_tensor_names_that_are_paths_are_refused(cli, write, tmp_path, name):
    write("model.py", "x = 1\n")
    recipe = write("r.yaml", PY_RECIPE.replace("name: X,", f'name: "{name}",'))
    r = cli("validate", recipe)
    assert (
        r.exit_code == 3 and "not a valid tensor name" in r.stderr and f"{recipe}:6" in r.stderr
    ), r.stderr
    _no_traceback(r)


def test_a_model_name_with_a_trailing_newline_is_refused(cli, write):
    write("model.py", "x = 1\n")
    recipe = write("r.yaml", PY_RECIPE.replace("name: doubler", 'name: "doubler\\n"'))
    r = cli("validate", recipe)
    assert r.exit_code == 3 and "not a valid model name" in r.stderr and f"{recipe}:1" in r.stderr


@pytest.mark.parametrize("goldens", ["/etc/passwd", "../outside.npz", "link/passwd"])
def test_goldens_outside_the_recipe_directory_are_refused(cli, py_recipe, tmp_path, goldens):
    (tmp_path / "link").symlink_to("/etc")
    text = py_recipe.read_text().replace("goldens/doubler.npz", goldens)
    py_recipe.write_text(text)
    out = tmp_path / "OUT"
    r = cli("build", py_recipe, "-o", out)
    assert r.exit_code == 3 and "verify.goldens" in r.stderr and f"{py_recipe}:8" in r.stderr, (
        r.stderr
    )
    assert not out.exists()


# --- 4. hangs end with a clear error ----------------------------------------------------------------------------


def test_billion_laughs_ends_fast_with_exit_3(cli, write):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    recipe = write("bomb.yaml", "\n".join(lines) + "\nname: x\n")
    r = cli("validate", recipe)
    assert r.exit_code == 3 and "expands to more than" in r.stderr, r.stderr


def test_a_recipe_that_is_a_fifo_is_refused_without_blocking(cli, tmp_path):
    fifo = tmp_path / "r.yaml"
    os.mkfifo(fifo)
    for args in ([fifo], [tmp_path]):
        r = cli("validate", *args)
        assert r.exit_code == 3 and "is not a regular file (a FIFO)" in r.stderr, r.stderr


def test_dev_zero_as_a_recipe_is_refused(cli):
    r = cli("validate", "/dev/zero")
    assert r.exit_code == 3 and "a character device" in r.stderr
    _no_traceback(r)


@pytest.fixture
def llm_dir(tmp_path):
    shutil.copytree(EXAMPLES / "tiny-llama", tmp_path / "tiny-llama")
    shutil.copy(EXAMPLES / "tiny-llama-int4.yaml", tmp_path / "llm.yaml")
    return tmp_path


def test_a_checkpoint_holding_a_fifo_is_refused_without_blocking(cli, llm_dir):
    os.mkfifo(llm_dir / "tiny-llama" / "extra.bin")
    r = cli("plan", llm_dir / "llm.yaml")
    assert r.exit_code == 4 and "extra.bin is not a regular file (a FIFO)" in r.stderr, r.stderr


def test_a_checkpoint_link_to_dev_zero_is_refused(cli, llm_dir):
    (llm_dir / "tiny-llama" / "weights.bin").symlink_to("/dev/zero")
    r = cli("plan", llm_dir / "llm.yaml")
    assert r.exit_code == 4 and "outside" in r.stderr and "weights.bin" in r.stderr, r.stderr


def test_a_checkpoint_link_leaving_the_directory_is_refused(cli, llm_dir, tmp_path):
    (tmp_path / "secret.txt").write_text("s")
    (llm_dir / "tiny-llama" / "notes.txt").symlink_to(tmp_path / "secret.txt")
    r = cli("plan", llm_dir / "llm.yaml")
    assert r.exit_code == 4 and "outside" in r.stderr


def test_a_source_that_is_a_fifo_is_refused(cli, write, tmp_path):
    os.mkfifo(tmp_path / "model.py")
    recipe = write("r.yaml", PY_RECIPE)
    r = cli("plan", recipe)
    assert r.exit_code in (4,) and "FIFO" in r.stderr, r.stderr


# --- 5. tracebacks become exit 3 with file:line ---------------------------------------------------------------


@pytest.mark.parametrize("byte", [b"\x00", b"\x07", b"\x1b"])
def test_control_bytes_in_a_recipe_are_named_with_their_line(cli, write, byte):
    recipe = write("r.yaml", b"name: x\nversion: 1\nbackend: py" + byte + b"thon\n")
    r = cli("validate", recipe)
    assert r.exit_code == 3 and f"{recipe}:3" in r.stderr and "not allowed" in r.stderr, r.stderr
    _no_traceback(r)


@pytest.mark.parametrize("open_, close", [("[", "]"), ("{a: ", "}")])
def test_deeply_nested_yaml_is_refused_with_its_line(cli, write, open_, close):
    recipe = write("r.yaml", "name: x\nv: " + open_ * 5000 + close * 5000 + "\n")
    r = cli("validate", recipe)
    assert r.exit_code == 3 and "nests deeper than" in r.stderr and f"{recipe}:2" in r.stderr, (
        r.stderr
    )


HUGE = 2**70


@pytest.mark.parametrize(
    "old,new,line",
    [
        ("max_batch_size: 4", f"max_batch_size: {HUGE}", 5),
        ("dims: [3]}]\noutputs", f"dims: [{HUGE}]}}]\noutputs", 6),
        ("version: 1", f"version: {HUGE}", 2),
        ("max_batch_size: 4", f"max_batch_size: 4\ninstances: [{{count: {HUGE}}}]", 6),
        ("max_batch_size: 4", f"max_batch_size: 4\nbatching: {{max_queue_delay_us: {HUGE}}}", 6),
        ("max_batch_size: 4", f"max_batch_size: 4\nversion_policy: {{latest: {HUGE}}}", 6),
        ("max_batch_size: 4", "max_batch_size: 2147483648", 5),  # int32 in ModelConfig
        (
            "max_batch_size: 4",
            "max_batch_size: 4\nversion_policy: {latest: 4294967296}",
            6,
        ),  # uint32
    ],
)
def test_integers_beyond_the_proto_types_are_recipe_errors(cli, py_recipe, old, new, line):
    text = py_recipe.read_text()
    assert old in text
    py_recipe.write_text(text.replace(old, new, 1))
    r = cli("validate", py_recipe)
    assert r.exit_code == 3 and f"{py_recipe}:{line}" in r.stderr, r.stderr
    _no_traceback(r)


def test_model_names_are_bounded_by_name_max(cli, write, tmp_path):
    write("model.py", "x = 1\n")
    ok = write("ok.yaml", PY_RECIPE.replace("name: doubler", "name: " + "m" * 255))
    assert cli("validate", ok).exit_code == 0
    for n in (256, 300):
        bad = write(f"bad{n}.yaml", PY_RECIPE.replace("name: doubler", "name: " + "m" * n))
        r = cli("validate", bad)
        assert r.exit_code == 3 and f"{n} bytes long; the limit is 255" in r.stderr, r.stderr


def test_a_recipe_symlink_loop_is_named_not_skipped(cli, py_recipe, tmp_path):
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    for args in ([tmp_path / "loop.yaml"], [tmp_path]):
        r = cli("validate", *args)
        assert r.exit_code == 3 and "symlink loop" in r.stderr and "loop.yaml" in r.stderr, r.stderr


def test_a_nul_escape_in_a_path_is_a_recipe_error(cli, py_recipe, tmp_path):
    py_recipe.write_text(py_recipe.read_text().replace("path: model.py", 'path: "model\\0.py"'))
    r = cli("build", py_recipe, "-o", tmp_path / "OUT")
    assert r.exit_code == 3 and "NUL" in r.stderr and f"{py_recipe}:4" in r.stderr, r.stderr


def test_a_source_name_longer_than_the_filesystem_allows_is_a_plan_error(cli, py_recipe, tmp_path):
    """Found by test_fuzz: Path.is_file() raises ENAMETOOLONG (it swallows only 'not found' errors)."""
    name = "m" * 300 + ".py"
    py_recipe.write_text(py_recipe.read_text().replace("path: model.py", f"path: {name}"))
    r = cli("build", py_recipe, "-o", tmp_path / "OUT")
    _no_traceback(r)
    assert r.exit_code == 4 and "source.path" in r.stderr and "too long" in r.stderr, r.stderr
    assert f"{py_recipe}:4" in r.stderr and not (tmp_path / "OUT").exists()


def test_an_unreadable_golden_used_as_warmup_is_a_build_error(cli, py_recipe, tmp_path):
    (tmp_path / "goldens").mkdir()
    (tmp_path / "goldens" / "doubler.npz").write_bytes(b"")
    py_recipe.write_text(py_recipe.read_text() + "warmup: {data: goldens}\n")
    r = cli("build", py_recipe, "-o", tmp_path / "OUT")
    assert r.exit_code == 5 and "is not a readable .npz" in r.stderr, r.stderr
    _no_traceback(r)


def test_an_onnx_graph_input_named_like_a_path_is_a_build_error(cli, write, tmp_path):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("../in", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    g = helper.make_graph([helper.make_node("Relu", ["../in"], ["y"])], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "relu.onnx")
    p = write(
        "r.yaml",
        "name: relu\nversion: 1\nbackend: onnxruntime\nsource: {path: relu.onnx}\n"
        "max_batch_size: 2\n",
    )
    r = cli("build", p, "-o", tmp_path / "OUT")
    assert (
        r.exit_code == 5 and "'../in' is not a valid tensor name" in r.stderr and f"{p}" in r.stderr
    ), r.stderr
    assert not (tmp_path / "OUT").exists()
    _no_traceback(r)


def test_an_engine_directory_holding_a_fifo_is_refused_without_blocking(cli, tmp_path, in_root):
    engine = tmp_path / "engine"
    shutil.copytree(in_root / "tests" / "fixtures" / "engines" / "tiny-llama-w4a16", engine)
    os.mkfifo(engine / "rank1.engine")
    r = cli(
        "build",
        "recipes/examples/tiny-llama-int4.yaml",
        "-o",
        tmp_path / "OUT",
        "--engine",
        f"tiny-llama={engine}",
    )
    assert r.exit_code == 5 and "rank1.engine is not a regular file (a FIFO)" in r.stderr, r.stderr
    assert not (tmp_path / "OUT").exists()


def test_a_255_byte_model_name_builds(cli, write, tmp_path):
    write("model.py", "x = 1\n")
    recipe = write("long.yaml", PY_RECIPE.replace("name: doubler", "name: " + "m" * 255))
    r = cli("build", recipe, "-o", tmp_path / "OUT")
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "OUT" / ("m" * 255) / "config.pbtxt").is_file()
