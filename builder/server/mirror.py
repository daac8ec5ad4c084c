"""The third-party packages a repository's Python code imports, as the environment tritonbuild runs in
has them: what the embedded server's environment of another Python minor (the target image's,
server/target.py) gets installed, so a model sees there what it sees here.

On tritonbuild's own minor the stub reads this environment's packages (TRITONBUILD_STUB_PATH,
server/launcher.py); on another minor it cannot, and a TensorRT-LLM group's tokenizer models lost
`tokenizers` there. So each module the Python files import (ast: top level, in functions and in
try blocks alike) that is neither the standard library, nor the stub's own, nor a file beside them is
mapped to the distributions that provide it here (importlib.metadata.packages_distributions) and
pinned at the version installed here; their dependencies installed here are pinned as constraints.
An import nothing here provides is listed as missing: a model that needs it fails here too.
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

# What the stub gives every model, and what the environment installs itself (envmake.py): numpy < 2
# whatever version runs here (numpy 2 breaks the stub's replies).
OWN = frozenset({"triton_python_backend_utils", "c_python_backend_utils"})
KEPT = frozenset({"numpy", "nvidia-pytriton", "pip", "setuptools", "wheel"})


@dataclass(frozen=True)
class Mirror:
    """requirements: 'tokenizers==0.23.3', each imported distribution at this environment's version;
    constraints: their dependencies installed here, at those versions; missing: 'yaml
    (m/1/model.py:3)' for an import nothing here provides."""

    requirements: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    size: int = 0  # bytes the pinned distributions take installed here (what pip will fetch, near)

    def __bool__(self) -> bool:
        return bool(self.requirements)


def python_files(roots: Iterable[Path]) -> list[Path]:
    """Every .py under the roots (a repository, a backend directory), __pycache__ left out."""
    found = []
    for root in roots:
        root = Path(root)
        files = [root] if root.suffix == ".py" else sorted(root.rglob("*.py"))
        found += [f for f in files if f.is_file() and "__pycache__" not in f.parts]
    return found


def imports(files: list[Path]) -> dict[str, str]:
    """Top-level module → where it is first imported ('dir/model.py:12'), relative imports, the
    standard library, the stub's modules and the files' own modules (a .py or a directory of them
    among the files) left out. A file that does not parse is skipped: the build and the server say
    why."""
    local = {f.stem for f in files} | {f.parent.name for f in files}
    found: dict[str, str] = {}
    for path in files:
        try:
            tree = ast.parse(path.read_bytes(), str(path))
        except (SyntaxError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in local or top in OWN or top in sys.stdlib_module_names:
                    continue
                found.setdefault(
                    top, f"{path.parent.parent.name}/{path.parent.name}/{path.name}:{node.lineno}"
                )
    return found


# mirror_of's answers in this process, by the files (path, size, mtime), minor and keep: one verify
# asks up to three times (core checks, the live server, the report), ~0.2 s each
_ASKED: dict[tuple, Mirror] = {}


def mirror_of(roots: Iterable[Path], minor: str, keep: Iterable[str] = ()) -> Mirror:
    """What an environment of Python `minor` needs for the Python files under roots to import what
    they import here. keep: distributions already asked for (TRITONBUILD_EMBEDDED_PACKAGES' names):
    those are not pinned. Asked once per process for the same files (this environment's
    distributions are taken not to change meanwhile)."""
    files = python_files(roots)
    key = (minor, tuple(sorted(keep)), tuple(_identity(f) for f in files))
    if key not in _ASKED:
        _ASKED[key] = _mirror(files, minor, keep)
    return _ASKED[key]


def _identity(path: Path) -> tuple:
    try:
        st = path.stat()
    except OSError:
        return (str(path),)
    return str(path), st.st_size, st.st_mtime_ns


def _mirror(files: list[Path], minor: str, keep: Iterable[str]) -> Mirror:
    kept = KEPT | {canonicalize_name(_name(each)) for each in keep}
    wanted = imports(files)
    if not wanted:
        return Mirror()
    providers = metadata.packages_distributions()
    roots_found: dict[str, str] = {}
    missing = []
    for module, where in sorted(wanted.items()):
        dists = providers.get(module)
        if not dists:
            missing.append(f"{module} ({where})")
            continue
        for dist in dists:
            name = canonicalize_name(dist)
            if name not in kept:
                roots_found.setdefault(name, dist)
    pins = _closure(list(roots_found), minor, kept)
    # NOTE: a version installed here that does not run on the target's Python (filelock 4.3 needs
    # 3.11: a 3.10 target) is left to pip, which picks one that does
    requirements = tuple(
        sorted(_requirement(name, pins[name]) for name in roots_found if name in pins)
    )
    constraints = tuple(
        sorted(
            f"{name}=={version}"
            for name, version in pins.items()
            if version and name not in roots_found and _origin(name) is None
        )
    )
    return Mirror(requirements, constraints, tuple(missing), _installed_size(pins))


def _installed_size(names: Iterable[str]) -> int:
    """What the distributions take here, from their RECORD files."""
    total = 0
    for name in names:
        try:
            files = metadata.distribution(name).files or []
        except metadata.PackageNotFoundError:
            continue
        total += sum(each.size or 0 for each in files)
    return total


def _requirement(name: str, version: str) -> str:
    """name==version; name @ URL for a distribution installed from a directory (editable too), an
    archive or a version control system (its direct_url.json, PEP 610), whose version no index
    holds: your own library a model imports is installed for the target from where it came."""
    origin = _origin(name)
    if origin:
        return f"{name} @ {origin}"
    return f"{name}=={version}" if version else name


def _origin(name: str) -> str | None:
    try:
        text = metadata.distribution(name).read_text("direct_url.json")
        found = json.loads(text) if text else None
    except (metadata.PackageNotFoundError, ValueError):
        return None
    url = found.get("url") if isinstance(found, dict) else None
    if not isinstance(url, str):
        return None
    vcs = found.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs"):
        revision = vcs.get("commit_id") or vcs.get("requested_revision")
        return f"{vcs['vcs']}+{url}" + (f"@{revision}" if revision else "")
    return url


def _closure(names: list[str], minor: str, kept: frozenset[str]) -> dict[str, str]:
    """Each distribution and its dependencies installed here (as Python `minor` would ask for them,
    extras left out) → the version installed here, '' where that version does not declare support
    for Python `minor` (Requires-Python)."""
    marker_env = {"python_version": minor, "python_full_version": f"{minor}.0", "extra": ""}
    pins: dict[str, str] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in pins or name in kept:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a dependency not installed here: pip picks it for the target
        pins[name] = dist.version if _runs_on(dist, minor) else ""
        for line in dist.requires or ():
            try:
                requirement = Requirement(line)
                if requirement.marker and not requirement.marker.evaluate(marker_env):
                    continue
            except (InvalidRequirement, UndefinedEnvironmentName):
                continue
            todo.append(canonicalize_name(requirement.name))
    return pins


def _runs_on(dist: metadata.Distribution, minor: str) -> bool:
    """Whether the installed version declares support for Python `minor` (none declared: yes)."""
    declared = dist.metadata.get("Requires-Python")
    try:
        return not declared or SpecifierSet(declared).contains(f"{minor}.0", prereleases=True)
    except InvalidSpecifier:
        return True


def _name(requirement: str) -> str:
    try:
        return Requirement(requirement).name
    except InvalidRequirement:
        return requirement
