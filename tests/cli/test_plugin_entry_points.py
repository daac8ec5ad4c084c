"""An out-of-tree backend installed as a distribution (a real .dist-info with entry_points.txt in the group
`tritonbuild.backends`, on the CLI subprocess's path) reaches every CLI command; a broken plug-in is a clear
PluginError (exit 12) naming its distribution and entry point where its kind is used, a warning elsewhere, never a
traceback, and the built-in backends keep working beside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.plugins.affine import write_recipe
from tritonbuild.errors import PluginError

AFFINE = ROOT / "tests" / "plugins" / "affine.py"
BUILTIN_RECIPE = ROOT / "recipes" / "examples" / "feature-normalizer.yaml"


def install(site: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """A distribution as an installer leaves it in site-packages: its modules and DIST-VERSION.dist-info
    (METADATA, entry_points.txt, RECORD)."""
    for rel, text in modules.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    group = "\n".join(f"{name} = {value}" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[tritonbuild.backends]\n{group}\n")
    (info / "RECORD").write_text(
        "".join(f"{rel},,\n" for rel in [*modules, f"{info.name}/METADATA"])
    )


def run_cli(site: Path | None, *args) -> subprocess.CompletedProcess:
    path = [str(site)] if site else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    env.pop("TRITONBUILD_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "tritonbuild", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT if site is None else site.parent,
    )


PLUGIN = """
from tbplug_affine.affine import AffineBackend as Affine


class AffineBackend(Affine):
    \"\"\"The toy affine backend as a custom Triton backend (backend: "affine" in config.pbtxt), which verify
    leaves to a server with that backend (route 'none') after its own offline check.\"\"\"

    triton_backend = "affine"
    route = "none"

    def configure(self, mc, recipe):
        mc.backend = "affine"

    def offline_checks(self, mc, model_dir, versions):
        return [("affine-plugin", [], "checked by the tbplug-affine plug-in")]
"""


@pytest.fixture
def affine_site(tmp_path) -> Path:
    """tests/plugins/affine.py, made a custom Triton backend, as an installed distribution `tbplug_affine`."""
    site = tmp_path / "site"
    install(
        site,
        "tbplug_affine",
        {"affine": "tbplug_affine.backend:AffineBackend"},
        {
            "tbplug_affine/__init__.py": "",
            "tbplug_affine/affine.py": AFFINE.read_text(),
            "tbplug_affine/backend.py": PLUGIN,
        },
    )
    return site


def test_an_installed_plugin_reaches_validate_build_verify_and_schema(affine_site, tmp_path):
    recipe = write_recipe(tmp_path)
    assert run_cli(None, "validate", recipe).returncode == 3  # not installed: unknown backend

    r = run_cli(affine_site, "validate", recipe)
    assert r.returncode == 0, r.stderr
    schema = json.loads(run_cli(affine_site, "schema").stdout)
    assert "affine" in schema["discriminator"]["mapping"]
    assert "python" in schema["discriminator"]["mapping"]  # the built-ins are still there

    out = tmp_path / "OUT"
    r = run_cli(affine_site, "build", recipe, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "SCALE = np.float32(2.0)" in (out / "affine-demo" / "1" / "model.py").read_text()
    assert 'backend: "affine"' in (out / "affine-demo" / "config.pbtxt").read_text()
    # verify: the plug-in's offline check runs; a server with the affine backend is needed to run the model
    # (route 'none': not passed, exit 6, as for any model verify cannot run here)
    r = run_cli(affine_site, "verify", out, "--json")
    assert r.returncode == 6, r.stdout + r.stderr
    report = json.loads(r.stdout)
    (model,) = report["models"]
    assert (model["name"], model["backend"], model["route"]) == ("affine-demo", "affine", "none")
    (row,) = [row for row in report["static"] if row["check"] == "affine-plugin"]
    assert (row["model"], row["ok"]) == ("affine-demo", True)
    assert "warning" not in r.stderr and "Traceback" not in r.stderr
    r = run_cli(None, "verify", out, "--json")  # without the plug-in: no such check
    assert "affine-plugin" not in r.stdout, r.stdout


BROKEN = {
    "gone": ("tbbroken.missing:Backend", "importing tbbroken.missing:Backend failed"),
    "number": ("tbbroken.things:NUMBER", "not a tritonbuild Backend"),
    "onnxruntime": ("tbbroken.things:Clash", "already registered"),
    "misnamed": ("tbbroken.things:Misnamed", "its backend is named 'other'"),
    "abstract": ("tbbroken.things:Abstract", "Abstract() failed: TypeError"),
}
THINGS = """
from typing import Literal

from tritonbuild.backends.base import Backend
from tritonbuild.recipe.models import Recipe

NUMBER = 42


class Clash(Backend):
    name = "onnxruntime"


class OtherRecipe(Recipe):
    backend: Literal["other"]


class Abstract(Backend):
    name = "abstract"


class Misnamed(Abstract):
    name = "other"
    recipe_type = OtherRecipe
    step_toolchain = {}
    triton_backend = "python"
    route = "none"

    def plan_steps(self, loaded, ctx):
        return []

    def run_step(self, ctx):
        pass

    def derive_io(self, recipe, files, recipe_dir):
        return [], []
"""


@pytest.fixture
def broken_site(tmp_path) -> Path:
    site = tmp_path / "site"
    install(
        site,
        "tbbroken",
        {name: value for name, (value, _) in BROKEN.items()},
        {"tbbroken/__init__.py": "", "tbbroken/things.py": THINGS},
    )
    return site


def test_broken_plugins_leave_the_builtin_backends_working_and_say_so(broken_site, tmp_path):
    r = run_cli(broken_site, "validate", BUILTIN_RECIPE)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    for name, (value, why) in BROKEN.items():
        line = next(line for line in r.stderr.splitlines() if f"entry point {name} =" in line)
        assert "warning" in line and "tbbroken 0.1" in line and value in line, line
        assert why in r.stderr
    schema = json.loads(run_cli(broken_site, "schema").stdout)
    assert {"python", "onnxruntime", "vllm"} <= set(schema["discriminator"]["mapping"])


@pytest.mark.parametrize("name", ["gone", "number", "misnamed", "abstract"])
def test_a_recipe_of_a_broken_plugin_is_a_plugin_error(broken_site, tmp_path, name):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"name: m\nversion: 1\nbackend: {name}\nsource: {{path: m.py}}\n")
    value, why = BROKEN[name]
    r = run_cli(broken_site, "validate", recipe)
    assert r.returncode == PluginError.exit_code == 12, r.stderr
    assert "Traceback" not in r.stderr and "unknown backend" not in r.stderr
    first = r.stderr.splitlines()[0]
    assert f"tbbroken 0.1, entry point {name} = {value}" in first and why in first, first
    assert "pip uninstall tbbroken" in r.stderr
    assert r.stderr.count(why) == 1  # said once: not repeated as a warning

    r = run_cli(broken_site, "validate", recipe, "--json")
    doc = json.loads(r.stdout)
    assert (doc["error"], doc["exit_code"]) == ("plugin", 12)
    assert "tbbroken" in doc["where"]
