"""`uv pip install ARGS` with the index settings pip has here (ci/test.sh installs the project with it).

uv reads no pip.conf and no PIP_* variable, and these machines keep their packages in pip's settings: a
find-links directory (torch's CPU build on local disk), local file indexes beside PyPI, a constraint file and a
CA bundle. This asks pip for its effective settings (`pip config list`: its configuration files and PIP_*
variables, merged the way pip merges them) and passes each to uv as the option or variable uv reads for it, with
pip's way of choosing among indexes (the best version from all of them: uv's unsafe-best-match; uv's own default
stops at the first index that has the name). A setting uv has no equivalent for is an error, not dropped.

    .venv/bin/python ci/uv_pip.py install -c ci/constraints.txt -e '.[test]'
    .venv/bin/python ci/uv_pip.py install --python OTHER/bin/python WHEEL   # into another environment

Without --python it installs into the environment of the Python running it (that environment's uv).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

# pip's option -> uv's (repeated per value where pip takes a whitespace-separated list)
LISTS = {
    "find-links": "--find-links",
    "extra-index-url": "--extra-index-url",
    "constraint": "--constraint",
}
SINGLE = {"index-url": "--index-url"}
FLAGS = {"no-index": "--no-index"}
# what changes nothing uv does (the files pip read, merged above; uv compiles no bytecode unless asked; its
# cache is its own)
IGNORED = {
    "cache-dir",
    "config-file",
    "disable-pip-version-check",
    "no-compile",
    "no-cache-dir",
    "progress-bar",
}
ENV = {"cert": "SSL_CERT_FILE", "default-timeout": "UV_HTTP_TIMEOUT", "timeout": "UV_HTTP_TIMEOUT"}
# pip's order of precedence: an environment variable over the install command's section over [global]
RANK = {"global": 0, "install": 1, ":env:": 2}


def pip_settings(python: str) -> dict[str, str]:
    out = subprocess.run(
        [python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    ranked: dict[str, tuple[int, str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if section not in RANK:  # another command's section
            continue
        if name not in ranked or RANK[section] >= ranked[name][0]:
            ranked[name] = (RANK[section], ast.literal_eval(value))  # pip prints repr()
    return {name: value for name, (_, value) in ranked.items()}


def uv_options(settings: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    args, env = ["--index-strategy", "unsafe-best-match"], {}
    for name, value in sorted(settings.items()):
        if name in LISTS:
            for item in value.split():
                args += [LISTS[name], item]
        elif name in SINGLE:
            args += [SINGLE[name], value]
        elif name in FLAGS:
            if value.lower() in ("1", "true", "yes", "on"):
                args.append(FLAGS[name])
        elif name in ENV:
            env[ENV[name]] = value
        elif name not in IGNORED:
            raise SystemExit(
                f"ci/uv_pip.py: pip's setting {name}={value!r} has no uv equivalent here"
            )
    return args, env


def target_python(rest: list[str]) -> tuple[str, list[str]]:
    """The interpreter to install into (--python PATH or --python=PATH among the arguments, else the
    one running this) and the other arguments."""
    for i, arg in enumerate(rest):
        if arg == "--python" and i + 1 < len(rest):
            return rest[i + 1], rest[:i] + rest[i + 2 :]
        if arg.startswith("--python="):
            return arg.partition("=")[2], rest[:i] + rest[i + 1 :]
    return sys.executable, rest


def main(argv: list[str]) -> int:
    uv = Path(sys.executable).parent / "uv"
    args, env = uv_options(pip_settings(sys.executable))
    command, (python, rest) = argv[0], target_python(argv[1:])
    cmd = [str(uv), "pip", command, "--python", python, *args, *rest]
    return subprocess.run(cmd, env={**os.environ, **env}).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
