"""Thin click CLI: parse options, call builder.api, render. Exit codes come from tritonbuild.errors.

One module per command family; importing them registers their commands on `main`.
"""

from tritonbuild.cli import (  # noqa: F401  (importing them registers their commands)
    cache,
    deploy,
    embedded,
    export,
    infer,
    publish,
    recipes,
    serve,
    tune,
    verify,
)
from tritonbuild.cli.common import main

__all__ = ["main"]
