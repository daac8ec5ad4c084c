"""Shell completion, as docs/howto/config.md documents it: the variable is the one click derives from the console
script's name in pyproject.toml, and each documented command line prints a completion script for its shell that
completes tritonbuild's commands."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PAGE = ROOT / "docs" / "howto" / "config.md"
SCRIPT = Path(sys.executable).parent / "tritonbuild"
# what each shell's script must hold (click's templates: the function it registers for the command)
REGISTERS = {
    "bash": "complete -o nosort -F _tritonbuild_completion tritonbuild",
    "zsh": "compdef _tritonbuild_completion tritonbuild",
    "fish": "complete --no-files --command tritonbuild",
}


def console_script() -> str:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    (name,) = [name for name, target in scripts.items() if target.startswith("tritonbuild.")]
    return name


def documented() -> list[tuple[str, str]]:
    """(shell, command line) for each `_X_COMPLETE=SHELL_source tritonbuild` line of the page."""
    lines = re.findall(r"^(_\w+_COMPLETE=(\w+)_source \S+)", PAGE.read_text(), re.M)
    return [(shell, line) for line, shell in lines]


def test_the_documented_variable_is_the_one_click_derives_from_the_entry_point():
    name = console_script()
    variable = f"_{name.replace('-', '_').upper()}_COMPLETE"
    assert {shell for shell, _ in documented()} == set(REGISTERS)
    for _, line in documented():
        assert line.startswith(f"{variable}=") and line.endswith(f" {name}"), line


@pytest.mark.skipif(
    not SCRIPT.exists(), reason="the tritonbuild console script is not installed here"
)
@pytest.mark.parametrize(("shell", "line"), documented())
def test_each_documented_command_prints_a_completion_script(shell, line, tmp_path):
    assignment, program = shlex.split(line)
    variable, value = assignment.split("=")
    # from a directory whose config file is broken: completion must still print its script
    (tmp_path / "tritonbuild.toml").write_text("not = [valid\n")
    r = subprocess.run(
        [str(SCRIPT)],
        env={**os.environ, variable: value},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert REGISTERS[shell] in r.stdout
    assert program == SCRIPT.name


@pytest.mark.skipif(
    not SCRIPT.exists(), reason="the tritonbuild console script is not installed here"
)
def test_the_completion_completes_commands_and_options():
    def complete(*words: str) -> list[str]:
        env = {
            **os.environ,
            "_TRITONBUILD_COMPLETE": "bash_complete",
            "COMP_WORDS": " ".join(["tritonbuild", *words]),
            "COMP_CWORD": str(len(words)),
        }
        r = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert "plain,publish" in complete("pub")
    assert "plain,--endpoint-url" in complete("publish", "--end")
