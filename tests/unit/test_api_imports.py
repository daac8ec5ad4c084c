"""Start-up cost, guarded: `import tritonbuild.api` and `tritonbuild --help` import no stage, no
pydantic and no numpy (the api package names its functions and imports their modules on first use,
PEP 562; before, importing it cost 0.6 s of stages, and routing the CLI through it made --help three
times slower). Each check runs in a fresh interpreter."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

# what a stage imports: none of it may load before a command runs one
STAGES = (
    "recipe",
    "backends",
    "plan",
    "steps",
    "repository",
    "server",
    "verify",
    "publish",
    "tune",
)
HEAVY = ("pydantic", "numpy", "google.protobuf", "tritonclient", "torch")


def _loaded(code: str) -> list[str]:
    """The modules loaded after running code in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def _expensive(modules: list[str]) -> list[str]:
    stages = tuple(f"tritonbuild.{stage}" for stage in STAGES)
    return [
        name
        for name in modules
        if name.startswith(stages) or name.split(".")[0] in HEAVY or name.startswith(HEAVY)
    ]


def test_importing_the_api_imports_no_stage():
    assert _expensive(_loaded("import tritonbuild.api")) == []


def test_help_imports_no_stage():
    code = (
        "import contextlib, io\nfrom tritonbuild.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--help'])"
    )
    loaded = _loaded(code)
    assert "tritonbuild.cli.verify" in loaded  # the check sees the commands registered
    assert _expensive(loaded) == []


def test_the_checks_see_a_stage_import():
    """Guards against a vacuous pass: a stage module imported is found."""
    assert "tritonbuild.plan" in _expensive(_loaded("import tritonbuild.plan"))


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("build_repository", "building"),
        ("verify_repository", "checking"),
        ("serve", "serving"),
        ("tune", "tuning"),
    ],
)
def test_each_name_comes_from_its_module_on_first_use(name, module):
    """A lazy name is the function itself, from its own module, and only that module is imported
    (tune's load generator is not imported by verify)."""
    code = (
        f"import tritonbuild.api as api\nfirst = api.{name}\n"
        f"assert first is api.{name} and first.__module__ == 'tritonbuild.api.{module}'\n"
        f"assert {name!r} in dir(api) and {name!r} in api.__all__"
    )
    loaded = _loaded(code)
    assert f"tritonbuild.api.{module}" in loaded
    assert ("tritonbuild.api.tuning" in loaded) == (module == "tuning")


def test_every_name_the_api_offers_resolves():
    import tritonbuild.api as api

    for name in api.__all__:
        assert getattr(api, name) is getattr(sys.modules[api._FROM[name]], name)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        api.nothing_here  # noqa: B018


def _undocumented(function) -> list[str]:
    """What a function of the api leaves open: a **kwargs or *args relay, a parameter without a
    type, a keyword its docstring does not name."""
    problems = []
    for param in inspect.signature(function).parameters.values():
        if param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            problems.append(f"{param.name}: a relay ({param})")
        elif param.annotation is param.empty:
            problems.append(f"{param.name}: no type")
        elif param.kind is param.KEYWORD_ONLY and param.name not in (function.__doc__ or ""):
            problems.append(f"{param.name}: not in the docstring")
    return problems


def test_every_api_keyword_is_spelt_out_typed_and_documented():
    import tritonbuild.api as api

    functions = {
        name: getattr(api, name)
        for name in api.__all__
        if inspect.isfunction(getattr(api, name))
        and name in api.__dict__
        and getattr(api, name).__module__.startswith("tritonbuild.api.")
    }
    assert {"publish", "tune", "serve", "verify_repository", "deploy_snippets"} <= set(functions)
    problems = {name: found for name, fn in functions.items() if (found := _undocumented(fn))}
    assert problems == {}


def test_the_keyword_check_sees_a_relay_and_an_undocumented_keyword():
    def loose(root: str, *, keep: int = 1, **options):
        """Publish root."""

    assert _undocumented(loose) == ["keep: not in the docstring", "options: a relay (**options)"]
