"""The CLI's Application owns the cache directory, the output mode and progress."""

import io
import json
import shutil

import pytest
from rich.console import Console

from tests.conftest import EXAMPLES
from tritonbuild.cli.app import PlainProgress


def _cache_files(root):
    return {p.relative_to(root).parts[0] for p in root.rglob("*")} if root.exists() else set()


@pytest.mark.parametrize("where", ["before", "after"])
def test_cache_dir_moves_steps_and_the_file_hash_cache(
    cli, py_recipe, tmp_path, monkeypatch, where
):
    env_dir, chosen = tmp_path / "env-cache", tmp_path / "chosen"
    monkeypatch.setenv("TRITONBUILD_CACHE_DIR", str(env_dir))
    args = ["build", py_recipe, "-o", tmp_path / "OUT"]
    args = ["--cache-dir", chosen, *args] if where == "before" else [*args, "--cache-dir", chosen]
    r = cli(*args)
    assert r.exit_code == 0, r.stderr
    assert {"steps", "blobs", "file-hashes.json"} <= _cache_files(chosen)
    assert not env_dir.exists(), (
        "the environment's cache directory was written although --cache-dir was given"
    )


def test_remote_checkpoint_downloads_land_in_the_chosen_cache_dir(cli, tmp_path, monkeypatch):
    from tritonbuild.backends.llm.checkpoint import tree_digest
    from tritonbuild.core.hashing import sha256_file, tree_files

    ckpt = EXAMPLES / "tiny-llama"
    pin = tree_digest({rel.as_posix(): sha256_file(ckpt / rel) for rel in tree_files(ckpt)})
    remote = tmp_path / "remote"
    shutil.copytree(ckpt, remote / "tiny-llama")
    text = (
        (EXAMPLES / "tiny-llama-int4.yaml")
        .read_text()
        .replace(
            "checkpoint: {path: tiny-llama}",
            f"checkpoint: {{path: 'file://{remote}/tiny-llama', sha256: {pin}}}",
        )
    )
    (tmp_path / "llm.yaml").write_text(text)
    env_dir, chosen = tmp_path / "env-cache", tmp_path / "chosen"
    monkeypatch.setenv("TRITONBUILD_CACHE_DIR", str(env_dir))
    r = cli("plan", tmp_path / "llm.yaml", "--cache-dir", chosen, "--json")
    assert r.exit_code == 0, r.stderr
    assert (chosen / "checkpoints" / pin / "config.json").is_file()
    assert (chosen / "file-hashes.json").is_file()
    assert not env_dir.exists()


def test_quiet_prints_nothing_on_success_and_still_reports_errors(cli, py_recipe, write, tmp_path):
    # (a declared goldens file that does not exist yet is a warning, even with -q: declare none here)
    write(py_recipe.name, py_recipe.read_text().replace("goldens: goldens/doubler.npz, ", ""))
    r = cli("build", py_recipe, "-o", tmp_path / "OUT", "-q")
    assert r.exit_code == 0 and r.stdout == "" and r.stderr == ""
    bad = write("bad.yaml", "name: x\nversion: 1\nbackend: python\n")
    r = cli("-q", "validate", bad)
    assert r.exit_code == 3 and "error" in r.stderr


def test_usage_errors_are_json_under_json(cli, tmp_path):
    r = cli("build", "--json", tmp_path / "r.yaml")  # -o missing
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert doc["error"] == "usage" and doc["exit_code"] == 2 and "--output" in doc["message"]
    r = cli("--json", "no-such-command")
    assert r.exit_code == 2 and json.loads(r.stdout)["error"] == "usage"
    r = cli("build", tmp_path / "r.yaml")  # without --json: click's text on stderr
    assert r.exit_code == 2 and "Missing option" in r.stderr and r.stdout == ""


def test_plain_progress_throttles_and_beats():
    now = [0.0]
    buf = io.StringIO()
    p = PlainProgress(Console(file=buf, width=200), interval=5.0, clock=lambda: now[0])
    p("hashing inputs")  # the first message prints at once
    now[0] = 1.0
    p("export text-encoder")  # within the interval: held back
    assert buf.getvalue().count("\n") == 1
    now[0] = 6.0
    p.tick()  # the heartbeat: the newest message, once the interval has passed
    now[0] = 8.0
    p.tick()  # not again within the interval
    now[0] = 11.5
    p.tick()  # a long step: repeated with the elapsed time
    lines = buf.getvalue().splitlines()
    assert lines == [
        "[    0s] hashing inputs",
        "[    6s] export text-encoder",
        "[   12s] export text-encoder",
    ]
    assert "\x1b" not in buf.getvalue()


def test_verbose_prints_every_progress_message_and_the_cache_dir(cli, py_recipe, tmp_path):
    r = cli("build", py_recipe, "-o", tmp_path / "OUT", "-v", "--cache-dir", tmp_path / "c")
    assert r.exit_code == 0, r.stderr
    assert f"build cache {tmp_path / 'c'}" in r.stderr and "toolchain: " in r.stderr
    assert "doubler: python.package" in r.stderr  # the progress line, unthrottled
    r = cli("build", py_recipe, "-o", tmp_path / "OUT")
    assert "build cache" not in r.stderr and "toolchain: " not in r.stderr


def test_logs_get_plain_progress_lines_for_build_and_publish(cli, py_recipe, tmp_path):
    """CliRunner is a non-TTY, like a CI log: plain lines, no rich control codes, none with --quiet."""
    r = cli("build", py_recipe, "-o", tmp_path / "OUT")
    assert r.exit_code == 0, r.stderr
    assert "s] planning 1 recipe(s): hashing their inputs" in r.stderr and "\x1b[" not in r.stderr
    r = cli("publish", tmp_path / "OUT", f"file://{tmp_path / 'target'}", "--skip-verify")
    assert r.exit_code == 0, r.stderr
    assert "KiB (100%) done" in r.stderr and "\x1b[" not in r.stderr
    r = cli("publish", tmp_path / "OUT", f"file://{tmp_path / 'target2'}", "--skip-verify", "-q")
    assert r.exit_code == 0 and "KiB" not in r.stderr


def test_commands_print_only_through_the_application():
    """No console of the CLI's own outside the Application: no module-level Console or console names (out, err)
    in builder/cli, and a Console is made only by app.py's Application."""
    import ast

    from tests.conftest import ROOT

    for path in sorted((ROOT / "builder" / "cli").glob("*.py")):
        tree = ast.parse(path.read_text())
        module_names = {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        assert not module_names & {"out", "err", "console"}, f"{path.name}: a module-level console"
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "tritonbuild.cli.common"
            for alias in node.names
        }
        assert not imported & {"out", "err"}, f"{path.name} imports a console from cli.common"
        makers = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("Console", "_console")
        ]
        assert path.name == "app.py" or not makers, f"{path.name}:{makers} makes a console"


def test_each_invocation_has_consoles_of_its_own(cli, py_recipe):
    """-q on one invocation does not silence the next (the consoles were module globals, reset by hand)."""
    assert cli("validate", py_recipe, "-q").stdout == ""
    assert "ok  " in cli("validate", py_recipe).stdout
