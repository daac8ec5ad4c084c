"""The contributor's guide (docs/contributing/): each page's `touches` tables name files that exist (a new file: its
folder), and their counts are issue 44's seam counts, re-counted: a new backend <= 2 source files (0 as a plug-in),
a new store <= 2, a verify check 1, a new image release 2 (its facts files), a new vLLM release the refresh command
and the files it writes (0 hand edits). Where a target does not hold, the count recorded is today's, so the page and
this test change together when the code does. Each list is also checked against what the code needs, not only
against itself."""

from __future__ import annotations

import fnmatch
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

PAGES = ROOT / "docs" / "contributing"
KINDS = {
    "source",
    "source (new)",
    "data",
    "generated",
    "facts",
    "test",
    "test (new)",
    "docs",
    "plug-in",
}
TABLE = re.compile(r"<!-- touches: ([\w-]+) -->\n((?:\|.*\n)+)")


def touches() -> dict[str, list[tuple[str, str]]]:
    """Every `touches` table of the guide: key → [(file, kind)]."""
    out = {}
    for page in sorted(PAGES.glob("*.md")):
        for key, table in TABLE.findall(page.read_text()):
            assert key not in out, f"{key} listed twice"
            rows = [line.split("|")[1:3] for line in table.splitlines()[2:]]
            out[key] = [(re.fullmatch(r"\s*`([^`]+)`\s*", f).group(1), k.strip()) for f, k in rows]
    return out


TOUCHES = touches()


def files(key: str, *kinds: str) -> list[str]:
    return [f for f, k in TOUCHES[key] if k.removesuffix(" (new)") in kinds]


def tracked() -> set[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_every_task_of_the_issue_has_its_list():
    assert set(TOUCHES) == {
        "backend-in-tree",
        "backend-plugin",
        "store",
        "image-release",
        "vllm-release",
        "verify-check-backend",
        "verify-check-triton",
    }


@pytest.mark.parametrize("key", sorted(TOUCHES))
def test_every_file_named_exists(key):
    present = tracked()
    for path, kind in TOUCHES[key]:
        assert kind in KINDS, f"{key}: {path}: kind {kind!r}"
        if kind == "plug-in":
            continue
        if kind.endswith("(new)"):  # its folder exists, the file does not yet
            folder = path.split("NAME")[0].rsplit("/", 1)[0]
            assert (ROOT / folder).is_dir(), f"{key}: {folder}/ of {path}"
            assert "NAME" in path, f"{key}: a new file is named with NAME: {path}"
        elif "NAME" in path:  # a file every such thing has (each backend's backend.py)
            pattern = path.replace("NAME", "*")
            assert any(fnmatch.fnmatchcase(t, pattern) for t in present), f"{key}: no {pattern}"
        else:
            assert path in present, f"{key}: {path} is not in the tree"


def test_the_seam_counts():
    # targets that hold today (issue 44: a new backend <= 2 source files, a new store <= 2)
    assert len(files("backend-in-tree", "source")) == 2
    assert files("backend-plugin", "source", "data", "generated", "facts") == []
    assert len(files("store", "source")) == 2
    assert len(files("verify-check-backend", "source")) == 1
    assert len(files("verify-check-triton", "source")) == 1
    # an image release is its 2 facts files (target: 2, data + facts), no source file
    assert len(files("image-release", "source", "data", "facts", "generated")) == 2
    assert files("image-release", "source") == []
    # a vLLM release is the refresh command and the 4 files it writes: no hand edit (target: the command + data)
    assert len(files("vllm-release", "generated")) == 4
    assert files("vllm-release", "source", "data", "facts", "test", "docs") == []
    index = (PAGES / "index.md").read_text()
    assert "2 facts files: 2 files" in index and "its 4 generated files, 0 hand edits" in index


def test_a_backend_module_is_named_only_by_the_registry():
    """The in-tree list is all a backend needs: no module outside the backends' own folders (and the registry)
    names a built-in backend's module, so a new one is its module plus its BUILTIN line."""
    from tritonbuild.backends import plugins, registry

    packages = {module.split(".")[2] for module, _ in registry.BUILTIN}
    named = re.compile(rf"tritonbuild\.backends\.({'|'.join(sorted(packages))})\b")
    naming = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "builder").rglob("*.py")
        if named.search(path.read_text())
        and not any(
            path.is_relative_to(ROOT / "builder" / "backends" / p)
            or path == ROOT / "builder" / "backends" / f"{p}.py"
            for p in packages
        )
    }
    assert naming == {"builder/backends/registry.py"}
    assert set(files("backend-in-tree", "source")) - {"builder/backends/NAME/backend.py"} == naming
    page = (PAGES / "backend.md").read_text()
    assert f'[project.entry-points."{plugins.GROUP}"]' in page


def test_a_store_is_its_driver_and_its_registration():
    """Every Driver subclass the core defines is registered by core/stores.py's one loop: a new store's driver
    needs that entry and nothing else in the source."""
    from tritonbuild.core import stores
    from tritonbuild.core.drivers import Driver

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    defined = {c for c in subclasses(Driver) if c.__module__.startswith("tritonbuild.core.")}
    assert defined == {type(d) for d in stores.drivers()}
    assert "for _driver in (" in (ROOT / "builder/core/stores.py").read_text()
    assert set(files("store", "source")) == {
        "builder/core/NAME_driver.py",
        "builder/core/stores.py",
    }


def test_the_newest_image_release_is_in_every_file_listed():
    from tritonbuild.backends.llm.images import VLLM_IMAGES

    newest = max(VLLM_IMAGES, key=lambda tag: tuple(map(int, tag.split("."))))
    for path in files("image-release", "source", "data", "facts"):
        assert f'"{newest}"' in (ROOT / path).read_text(), f"{newest} not in {path}"


def test_the_refresh_command_writes_the_generated_files_and_the_newest_vllm_is_in_them():
    from tritonbuild.backends.vllm.versions import TABLE as table

    refresh = (ROOT / "tests/contracts/vllm_wheels.py").read_text()
    newest = max(table, key=lambda v: tuple(int(p) for p in re.findall(r"\d+", v)))
    for path in files("vllm-release", "generated"):
        assert Path(path).name in refresh, f"the refresh tool does not write {path}"
        assert f'"{newest}"' in (ROOT / path).read_text(), f"{newest} not in {path}"
    # every vLLM fact file the package ships (the builder's only vLLM release data) is one the command writes
    shipped = {f"builder/facts/{p.name}" for p in (ROOT / "builder" / "facts").glob("vllm_*.json")}
    assert shipped == set(files("vllm-release", "generated"))


def test_the_verify_check_hooks_named_are_the_backend_interface():
    from tritonbuild.backends.base import Backend

    page = (PAGES / "verify-check.md").read_text()
    hooks = {"offline_checks", "model_file_checks", "model_content_checks"}
    assert all(f"`{hook}`" in page and callable(getattr(Backend, hook)) for hook in hooks)
    assert "model_problems" in (ROOT / "builder/triton/rules.py").read_text()
