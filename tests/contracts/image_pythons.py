"""Which Python each NGC tritonserver image runs its Python backend on, re-derived from a clone of
triton-inference-server/server with its release branches (facts/triton_image_pythons.json):

    python -m tests.contracts.refresh image-pythons GITDIR

- the plain <tag>-py3 image: the Python backend QA's default PYTHON_ENV_VERSION at each release
  branch
  (qa/L0_backend_python/test.sh), the image's own python3, for which the QA sets up no other;
- the switch of the CPU build's base image (build.py) that came with it (Ubuntu 22.04 → 24.04);
- the trtllm-python-py3 and vllm-python-py3 images: the Python column of the release compatibility
  matrix.

Standard library only."""

from __future__ import annotations

import re
import subprocess

REPOSITORY = "triton-inference-server/server"
QA = "qa/L0_backend_python/test.sh"
MATRIX = "docs/introduction/compatibility.md"
# The branch whose matrix is read, and the branches whose build.py shows the base image switch
MATRIX_BRANCH = "r26.08"
BASE_SWITCH = ("r24.10", "r24.11")


def qa_python(text: str) -> tuple[int, str] | None:
    """(line, '3.X') of the QA's default PYTHON_ENV_VERSION; None where the script sets none."""
    for number, line in enumerate(text.splitlines(), 1):
        found = re.search(r'PYTHON_ENV_VERSION:="(\d+)"', line)
        if found:
            return number, f"3.{found.group(1)}"
    return None


def matrix_pythons(text: str) -> dict:
    """Container name → tag → {line, python: '3.X.Y'} from the matrix's Python version column."""
    out: dict = {}
    container, header = None, None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            found = re.match(r"^## Container Name: (\S+)", line)
            container, header = (found.group(1) if found else None), None
        elif container and line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif re.fullmatch(r"\d\d\.\d\d", cells[0]) and "Python version" in header:
                python = cells[header.index("Python version")].removeprefix("Python").strip()
                out.setdefault(container, {})[cells[0]] = {"line": number, "python": python}
    return out


def image_pythons(git_dir: str) -> dict:
    """The whole facts file's content, from the clone's release branches."""

    def git(*argv: str) -> str:
        return subprocess.run(
            ["git", "--git-dir", git_dir, *argv], capture_output=True, text=True, check=True
        ).stdout

    def source(branch: str, path: str, where: dict) -> dict:
        commit = git("rev-parse", f"{branch}^{{commit}}").strip()
        return {"repository": REPOSITORY, "branch": branch, "commit": commit, "path": path, **where}

    branches = sorted(set(re.findall(r"\br(\d\d\.\d\d)\n", git("branch", "--list", "r*") + "\n")))
    releases = {}
    for tag in branches:
        listed = git("ls-tree", "--name-only", f"r{tag}", QA).strip()
        found = qa_python(git("show", f"r{tag}:{QA}")) if listed else None
        if found:
            releases[tag] = {
                "python": found[1],
                "source": source(f"r{tag}", QA, {"line": found[0]}),
            }
    base = {}
    for branch in BASE_SWITCH:
        lines = git("show", f"{branch}:build.py").splitlines()
        number = next(n for n, line in enumerate(lines, 1) if 'base_image = "ubuntu:' in line)
        image = re.search(r'"(ubuntu:[\d.]+)"', lines[number - 1]).group(1)
        base[branch[1:]] = {
            "base_image": image,
            "source": source(branch, "build.py", {"line": number}),
        }
    tables = matrix_pythons(git("show", f"{MATRIX_BRANCH}:{MATRIX}"))
    out = {"py3": {"releases": releases}, "ubuntu_base": base}
    for container in ("trtllm-python-py3", "vllm-python-py3"):
        rows = tables[container]
        span = f"{min(r['line'] for r in rows.values())}-{max(r['line'] for r in rows.values())}"
        out[container] = {"source": source(MATRIX_BRANCH, MATRIX, {"lines": span}), "images": rows}
    return out
