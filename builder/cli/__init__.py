"""Thin click CLI: parse options, call builder.api, render. Exit codes come from builder.errors.

One module per command family; importing them registers their commands on `main`.
"""

from builder.cli import cache, publish, recipes, verify  # noqa: F401  (register commands)
from builder.cli.common import main

__all__ = ["main"]
