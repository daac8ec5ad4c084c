"""The only place that chains stages: load → plan → build → assemble → verify → publish. The CLI
calls only this package.

Importing it is cheap: each name below comes from its module on first use (PEP 562's module
__getattr__), so `tritonbuild --help` imports no stage (tests/unit/test_api_imports.py). The
modules: api/building.py (validate, plan, build, the CI matrix, the schema, the Model Analyzer
export), api/checking.py (verify, adopt, infer, status, perf_analyzer data), api/tuning.py (tune),
api/publishing.py (publish, ls, rollback, a target's objects, deploy-snippets), api/serving.py
(serve), api/maintenance.py (cache and embedded-environment upkeep), and api/options.py, what the
CLI's options, help texts and output need from below (the stores' URLs, the default image).
The CLI imports nothing else of tritonbuild but errors (tests/unit/test_layers.py)."""

from __future__ import annotations

import importlib

# NOTE: the stores registered before anything is printed: the redactor learns their secret
# variables as core/stores.py registers them (tests/unit/core/test_store_seam.py)
import tritonbuild.core.stores  # noqa: F401
from tritonbuild.api import options as _options

# name → the module it is imported from on first use (the one list of what the api offers)
_FROM = {
    **dict.fromkeys(
        (
            "build_matrix",
            "build_repository",
            "export_model_analyzer",
            "plan",
            "recipe_schema",
            "validate",
        ),
        "tritonbuild.api.building",
    ),
    **dict.fromkeys(
        (
            "InferResult",
            "adopt",
            "export_perf_data",
            "infer",
            "rebuild_and_compare",
            "status",
            "verify_repository",
        ),
        "tritonbuild.api.checking",
    ),
    **dict.fromkeys(
        (
            "REQUIREMENTS_FILE",
            "deploy_snippets",
            "list_target",
            "node_selector",
            "notify_failures",
            "publish",
            "rollback",
            "store_secret_keys",
            "target_url",
            "verify_target",
        ),
        "tritonbuild.api.publishing",
    ),
    **dict.fromkeys(("BACKEND_ENTRY", "Serving", "ServeReady", "serve"), "tritonbuild.api.serving"),
    "tune": "tritonbuild.api.tuning",
    # what serves a repository (--tritonserver, --triton-image), passed whole to verify, serve,
    # tune, infer, build and embedded
    "ServingTarget": "tritonbuild.server.target",
    **dict.fromkeys(
        (
            "EmbeddedEnvironment",
            "cache_gc",
            "cache_store",
            "cache_verify",
            "embedded_environment",
            "embedded_prune",
        ),
        "tritonbuild.api.maintenance",
    ),
    # what the CLI's options, help texts and output need: cheap (tritonbuild --help imports it); its
    # own __all__ is the one list
    **dict.fromkeys(_options.__all__, "tritonbuild.api.options"),
}
__all__ = sorted(_FROM)


def __getattr__(name: str):
    """A public name imported from its module, then kept here (the next use is a plain lookup)."""
    module = _FROM.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_FROM})
