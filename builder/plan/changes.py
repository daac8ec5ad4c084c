"""Which recipes changed since a git revision: their own file, any input file of their steps, their
goldens, or a model they call."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tritonbuild.core.stores import is_url
from tritonbuild.errors import UsageError
from tritonbuild.plan.models import Plan


def _git(args: list[str], cwd: Path) -> str:
    try:
        completed = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60
        )
    except FileNotFoundError:
        raise UsageError(
            "--changed-since needs git, which is not installed", hint="install git"
        ) from None
    if completed.returncode != 0:
        stderr = completed.stderr.strip()
        detail = stderr.splitlines()[-1] if stderr else "unknown revision or not a repository"
        raise UsageError(
            f"git {' '.join(args)} failed: {detail}",
            hint="pass a revision that exists here (git fetch it first in shallow CI clones)",
        )
    return completed.stdout


def changed_files(rev: str, cwd: Path) -> set[Path]:
    top = Path(_git(["rev-parse", "--show-toplevel"], cwd).strip())
    _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd)
    names = _git(["diff", "--name-only", rev, "--"], top).splitlines()
    names += _git(["ls-files", "--others", "--exclude-standard"], top).splitlines()
    return {(top / name).resolve() for name in names if name}


def models_changed_since(plan: Plan, rev: str, cwd: Path) -> set[str]:
    changed = changed_files(rev, cwd)
    out = set()
    for model_plan in plan.models:
        recipe_path = Path(model_plan.recipe_path)
        paths = {(Path(model_plan.recipe_dir) / recipe_path.name).resolve(), recipe_path.resolve()}
        paths |= {
            Path(path).resolve()
            for step in model_plan.steps
            for path in step.inputs
            if not is_url(path)
        }
        goldens = getattr(model_plan.recipe.verify, "goldens", None)
        if goldens:
            paths.add((Path(model_plan.recipe_dir) / goldens).resolve())
        if paths & changed:
            out.add(model_plan.name)
    calls = {
        model_plan.name: {
            pipeline_step.model for pipeline_step in getattr(model_plan.recipe, "steps", [])
        }
        for model_plan in plan.models
    }
    grew = True
    while grew:  # a pipeline changes when a model it calls changes
        more = {name for name, deps in calls.items() if deps & out} - out
        out |= more
        grew = bool(more)
    needed = set(
        out
    )  # a selected pipeline needs the models it calls in the same repository (cache hits)
    stack = list(out)
    while stack:
        for dep in calls.get(stack.pop(), ()):
            if dep not in needed:
                needed.add(dep)
                stack.append(dep)
    return needed
