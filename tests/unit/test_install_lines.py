"""Every `pip install` the README, the docs site, the CI templates and the Dockerfiles tell people to run installs
something that exists: tritonbuild (which is on no package index) from a local clone or wheel or a git reference
pinned to a tag, and every other name one that our own CI installs from the index (ci/constraints.txt) or is
listed below with where it comes from."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
# Index packages that our CI does not install but the documents do, each published on PyPI (checked by name when
# added): awscli (Dockerfile.triton pulls a publish target with it), pip/wheel (upgrading the installer).
OTHER_INDEX_PACKAGES = {"awscli", "pip", "wheel"}
# pip options that take a value (the value is not a requirement)
VALUE_OPTIONS = {
    "-c",
    "--constraint",
    "-r",
    "--requirement",
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "-t",
    "--target",
    "--prefix",
    "--root",
    "--python",
    "--cache-dir",
    "--platform",
    "--python-version",
    "--only-binary",
    "--no-binary",
    "--progress-bar",
    "--timeout",
}
PINNED_GIT = re.compile(r"^git\+https://[^@\s]+@v\d+(\.\d+)*$")


def documents() -> list[Path]:
    docs = [
        p for p in (ROOT / "docs").rglob("*.md") if "runs" not in p.relative_to(ROOT / "docs").parts
    ]
    return [
        ROOT / "README.md",
        *docs,
        *sorted((ROOT / "ci" / "templates").glob("*.yml")),
        *sorted(ROOT.glob("Dockerfile*")),
    ]


def known_index_packages() -> set[str]:
    names = set(OTHER_INDEX_PACKAGES)
    for line in (ROOT / "ci" / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            names.add(canonicalize_name(Requirement(line).name))
    return names


def install_commands(text: str) -> list[str]:
    """The arguments of each `pip install` (a `\\`-continued line joined), up to the end of that shell command."""
    joined = re.sub(r"\\\n\s*", " ", text)
    found = []
    for match in re.finditer(r"\bpip3? install\b([^\n]*)", joined):
        found.append(re.split(r"&&|\|\||[|;)`]|\s#|2>|>", match.group(1))[0])
    return found


def requirements(arguments: str) -> list[str]:
    for closing in (
        "",
        '"',
        "'",
    ):  # a line inside a quoted string of its own (a Python list in a template)
        try:
            tokens = shlex.split(arguments + closing)
            break
        except ValueError:
            continue
    else:
        raise AssertionError(f"cannot read the install line {arguments!r}")
    out, skip = [], False
    for token in tokens:
        if skip:
            skip = False
        elif token.startswith("-"):
            skip = token in VALUE_OPTIONS
        elif token.strip(",]}"):
            out.append(token.rstrip(",]}") if "[" not in token else token.rstrip(",}"))
    return out


def variables(text: str) -> dict[str, str]:
    """NAME: value and NAME=value definitions in a template (where `$NAME` in an install line is set)."""
    return {
        m.group(1): m.group(2).strip().strip("\"'")
        for m in re.finditer(
            r"^\s*(?:ENV\s+|ARG\s+|export\s+)?([A-Z][A-Z0-9_]*)[:=]\s*(\S+)", text, re.M
        )
    }


def problem(requirement: str, defined: dict[str, str], known: set[str]) -> str | None:
    """Why this requirement would not install from what exists, or None."""
    name, _, url = requirement.partition("@")
    if requirement.startswith(("$", ".", "/", "~")) or ".whl" in name or "/" in name:
        return None  # a local clone, wheel or a path the document sets (TRITONBUILD_SRC)
    if url:
        url = url.strip()
        ref = re.fullmatch(r"\$\{?([A-Z][A-Z0-9_]*)\}?", url)
        url = defined.get(ref.group(1), url) if ref else url
        return (
            None
            if PINNED_GIT.match(url)
            else f"{requirement}: a direct reference must be git+https://…@vX.Y.Z"
        )
    try:
        parsed = Requirement(name)
    except InvalidRequirement:
        return f"{requirement}: not a requirement pip can read"
    if canonicalize_name(parsed.name) == "tritonbuild":
        return f"{requirement}: tritonbuild is on no package index; install a clone, a wheel or git+https://…@vX.Y.Z"
    if canonicalize_name(parsed.name) not in known:
        return f"{requirement}: {parsed.name} is not a package our CI installs from the index (OTHER_INDEX_PACKAGES)"
    return None


def test_the_scan_finds_the_install_lines_it_checks():
    texts = {p.name: p.read_text() for p in documents()}
    assert install_commands(texts["github-actions.yml"]) and install_commands(
        texts["gitlab-ci.yml"]
    )
    assert install_commands(texts["README.md"]) and install_commands(texts["Dockerfile.triton"])


@pytest.mark.parametrize(
    "requirement, why",
    [
        ("tritonbuild[s3]", "on no package index"),
        ("tritonbuild", "on no package index"),
        ("tritonbuild[s3] @ git+https://example.com/t.git@main", "must be git+https"),
        ("tritonbuild @ $TB_GIT", "must be git+https"),
        ("torch-cuda-nightly", "not a package our CI installs"),
    ],
)
def test_what_does_not_exist_is_named(requirement, why):
    assert why in problem(
        requirement, {"TB_GIT": "git+https://example.com/t.git"}, known_index_packages()
    )


def test_no_install_line_names_a_package_that_does_not_exist():
    known = known_index_packages()
    problems = []
    for path in documents():
        text = path.read_text()
        defined = variables(text)
        for arguments in install_commands(text):
            for requirement in requirements(arguments):
                why = problem(requirement, defined, known)
                if why:
                    problems.append(f"{path.relative_to(ROOT)}: {why}")
    assert problems == []
