"""What the CLI's options, help texts and output need from below the api, cheap to import (core and
the image facts only: `tritonbuild --help` imports this module, tests/unit/test_api_imports.py):
the stores' URLs, the default serving image, the cache directory, redaction, JSON-ready results,
and the backend plug-ins that could not be registered."""

from __future__ import annotations

import sys
from collections.abc import Callable

from tritonbuild.core.cachedir import resolve as resolve_cache_dir
from tritonbuild.core.results import plain
from tritonbuild.core.secrets import redact
from tritonbuild.core.stores import is_url, parse_location, url_examples, url_prefixes, with_scheme
from tritonbuild.errors import TritonBuildError
from tritonbuild.triton.images import default_image, image_python

# a callback for long work's progress lines (the CLI's status line or plain lines)
Progress = Callable[[str], None]

__all__ = [
    "Progress",
    "broken_plugins",
    "default_image",
    "image_python",
    "is_url",
    "parse_location",
    "plain",
    "redact",
    "resolve_cache_dir",
    "url_examples",
    "url_prefixes",
    "with_scheme",
]


def broken_plugins() -> list[TritonBuildError]:
    """The installed backend plug-ins (entry-point group tritonbuild.backends) that could not be
    registered, each a PluginError naming its distribution and entry point; empty where this process
    never used the backends (they are not imported to find out)."""
    backends = sys.modules.get("tritonbuild.backends")
    return [] if backends is None else list(backends.REGISTRY.broken())
