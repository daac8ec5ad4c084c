"""The project config file: the values a project repeats on every command line (publish target,
S3 endpoint, build cache, serving images), read once per invocation and given to click as the
context's ``default_map``, so a flag or an environment variable always overrides the file.

Where: the nearest of the current directory and its parents holding ``tritonbuild.toml`` (its
top-level keys), or a ``pyproject.toml`` with a ``[tool.tritonbuild]`` table; in one directory
``tritonbuild.toml`` wins. Each key is a flag's name without its dashes (docs/howto/config.md).
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from tritonbuild import api
from tritonbuild.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

FILE, PYPROJECT, TABLE = "tritonbuild.toml", "pyproject.toml", "tool.tritonbuild"

# key -> what it sets (the config page lists these; ci/docs_reference.py renders the table)
KEYS = {
    "target": f"the publish target ({', '.join(f'`{url}`' for url in api.url_examples())}): "
    "`publish OUT`'s and `ls`'s TARGET, `deploy-snippets --target`",
    "endpoint-url": "the S3-compatible endpoint this machine reaches the store at: `--endpoint-url` "
    "of publish, ls, rollback, serve and verify (not deploy-snippets: its `--endpoint-url` is the "
    "address the pods reach the store at; pass it there)",
    "cache-dir": "the local build cache, relative to the file's directory unless absolute "
    "(`--cache-dir`)",
    "cache-url": "the shared remote build cache (`--cache-url` of plan and build)",
    "triton-image": "the NGC image the repository is served by (`--triton-image` of build, verify, "
    "serve, embedded)",
    "image": "the serving image of `deploy-snippets --image`",
}
# An environment variable the command reads itself beats the file too (click gives env before
# default_map for options with envvar=; TRITONBUILD_CACHE_DIR is read by the Application).
ENV_FIRST = {"cache-dir": "TRITONBUILD_CACHE_DIR"}


@dataclass(frozen=True)
class ProjectConfig:
    path: Path
    values: dict[str, str]


def _table_text(path: Path) -> str | None:
    """The text of a config-bearing file, or None when this file holds no tritonbuild config."""
    text = path.read_text(encoding="utf-8")
    if path.name == FILE or re.search(r"^\s*\[\s*tool\.tritonbuild\s*\]", text, re.M):
        return text
    return None


def find(start: Path) -> Path | None:
    """The nearest config file from `start` upwards."""
    for folder in (start, *start.parents):
        for name in (FILE, PYPROJECT):
            candidate = folder / name
            if candidate.is_file() and _table_text(candidate) is not None:
                return candidate
    return None


def _line_of(text: str, key: str, path: Path) -> int:
    """The line a key is written on: `key = ...` at the top of tritonbuild.toml or inside
    [tool.tritonbuild], or a table header `[key]` / `[tool.tritonbuild.key]` (a table is refused)."""
    table = "" if path.name == FILE else TABLE
    own_table = f"{table}.{key}" if table else key
    inside = not table
    for number, line in enumerate(text.splitlines(), 1):
        header = re.match(r"^\s*\[+\s*([^\]]+?)\s*\]", line)
        if header:
            name = header.group(1)
            if name == own_table or name.startswith(own_table + "."):
                return number
            inside = bool(table) and name == table
        elif inside and re.match(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=", line):
            return number
    return 1


def load(start: Path | None = None) -> ProjectConfig | None:
    """The project config that applies in `start` (default: the current directory), checked: a
    file that does not parse, an unknown key or a value that is not a non-empty string is a usage
    error (exit 2) naming file:line and the fix."""
    path = find(Path.cwd() if start is None else start)
    if path is None:
        return None
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line = re.search(r"line (\d+)", str(e))
        raise UsageError(
            f"not valid TOML: {e}",
            where=f"{path}:{line.group(1) if line else 1}",
            hint="fix the TOML syntax (https://toml.io)",
        ) from None
    table = data if path.name == FILE else data.get("tool", {}).get("tritonbuild", {})
    values = {}
    for key, value in table.items():
        where = f"{path}:{_line_of(text, key, path)}"
        if key not in KEYS:
            close = difflib.get_close_matches(key.replace("_", "-"), KEYS, n=1)
            raise UsageError(
                f"unknown key {key!r}",
                where=where,
                hint=(f"did you mean {close[0]!r}? " if close else "")
                + "known keys: "
                + ", ".join(KEYS),
            )
        if not isinstance(value, str) or not value.strip():
            raise UsageError(
                f"{key} = {value!r}: expected a non-empty string",
                where=where,
                hint=f'write it as a quoted string, e.g. {key} = "..."',
            )
        if key == "cache-dir":
            value = str(path.parent / Path(value).expanduser())
        values[key] = value
    return ProjectConfig(path, values)


def _applies(key: str, param: click.Parameter, command: click.Command) -> bool:
    if isinstance(param, click.Argument):
        # TARGET from the file only where it is the last argument (`publish OUT`, `ls`): a TARGET
        # before another argument (rollback TARGET MODEL) would take that argument's place.
        arguments = [p for p in command.params if isinstance(p, click.Argument)]
        return key == "target" and param.name == "target" and arguments[-1] is param
    if f"--{key}" not in param.opts:
        return False
    return key != "endpoint-url" or param.envvar == "AWS_ENDPOINT_URL"


def default_map(config: ProjectConfig, command: click.Command) -> dict:
    """click's default_map for `command` and its subcommands: each param a key applies to gets its
    value, unless an environment variable the command reads first is set."""
    values = {
        key: value
        for key, value in config.values.items()
        if not os.environ.get(ENV_FIRST.get(key, ""))
    }
    out: dict = {
        param.name: values[key]
        for param in command.params
        for key in values
        if _applies(key, param, command)
    }
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            nested = default_map(config, sub)
            if nested:
                out[name] = nested
    return out
