"""Thin click CLI: parse options, call builder.api, render. Exit codes come from tritonbuild.errors.

One module per command family; importing them registers their commands on `main`.
"""

from tritonbuild.cli import cache, embedded, export, publish, recipes, tune, verify  # noqa: F401  (register commands)
from tritonbuild.cli.common import main

__all__ = ["main"]
