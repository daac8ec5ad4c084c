"""Shared helpers of backend modules: source files resolved, pinned and digested."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from tritonbuild.core import stores
from tritonbuild.core.hashing import sha256_file, tree_files
from tritonbuild.core.paths import PathProblem, regular_file
from tritonbuild.errors import BuildError, PlanError
from tritonbuild.recipe.load import LoadedRecipe


def local_source(loaded: LoadedRecipe, rel: str, loc: tuple) -> Path:
    """A local file named by the recipe (relative to the recipe's directory); it must exist."""
    path = Path(rel[len("file://") :] if rel.startswith("file://") else rel)
    path = path if path.is_absolute() else loaded.base_dir / path
    try:
        found = path.is_file()
    except OSError as e:  # is_file() swallows "not found" only: a name too long, a denied directory
        raise PlanError(
            f"{loaded.key(loc)}: {path}: {e.strerror}",
            where=loaded.where(loc),
            hint="name a file the filesystem can hold (each path component at most 255 bytes)"
            if e.errno == errno.ENAMETOOLONG
            else "fix the path or its directories' permissions",
        ) from None
    if not found:
        if path.exists() or path.is_symlink():
            try:
                regular_file(path, "source")
            except (PathProblem, OSError) as e:
                raise PlanError(
                    f"{loaded.key(loc)}: {e}", where=loaded.where(loc), hint="name a regular file"
                ) from None
        raise PlanError(
            f"{loaded.key(loc)}: source file not found: {path}",
            where=loaded.where(loc),
            hint="fix the path (relative paths start at the recipe's directory)",
        )
    return path


def pinned_digest(loaded: LoadedRecipe, path: Path, ctx) -> str:
    """sha256 of a source file (through ctx, the PlanContext), checked against the recipe's pin when
    there is one."""
    digest = ctx.digest(path)
    pin = loaded.recipe.source.sha256
    if pin and pin != digest:
        raise PlanError(
            f"sha256 of {path} is {digest}, the recipe pins {pin}",
            where=loaded.where(("source", "sha256")),
            hint="the file changed: restore the pinned file, or update source.sha256 if the change "
            "is intended",
        )
    return digest


def relative_dest(loaded: LoadedRecipe, path: Path, model_dir: Path, loc: tuple) -> str:
    """Where an extra file lands in the version directory: its path relative to model.py's
    directory."""
    try:
        return path.resolve().relative_to(model_dir.resolve()).as_posix()
    except ValueError:
        raise PlanError(
            f"{loaded.key(loc)}: {path} is not inside {model_dir} (model.py's directory), so "
            "model.py could not find it at the same relative path",
            where=loaded.where(loc),
            hint="move the file next to model.py or below it",
        ) from None


def fetch_url(url: str, dest: Path, expected_sha256: str | None) -> None:
    try:
        fs, path = stores.open_url(url)
        with fs.open(path, "rb") as src, open(dest, "wb") as out:
            shutil.copyfileobj(src, out, 4 * 1024 * 1024)
    except Exception as e:  # noqa: BLE001 - any driver failure is a build failure with the driver's words
        raise BuildError(
            f"cannot fetch {url}: {e}",
            hint="check the URL and credentials (standard env/profile chains)",
        ) from None
    if expected_sha256 and sha256_file(dest) != expected_sha256:
        raise BuildError(
            f"{url} does not match its sha256 pin {expected_sha256}",
            hint="the remote object changed; restore it or update source.sha256",
        )


def checkpoint_root(inputs: dict[str, str]) -> Path:
    """The directory holding every input file of a checkpoint step (their common path)."""
    import os

    paths = list(inputs)
    return Path(os.path.commonpath(paths)) if len(paths) > 1 else Path(paths[0]).parent


def copy_inputs(inputs: dict[str, str], dest: Path) -> None:
    """Copy a step's input files under dest, keeping their layout relative to checkpoint_root
    (reflinks where the filesystem has them; the step runner then moves them into the store,
    uncopied)."""
    from tritonbuild.core.cas import clone_or_copy

    root = checkpoint_root(inputs)
    for src in sorted(inputs):
        target = dest / Path(src).relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        clone_or_copy(Path(src), target)


def tree_inputs(root: Path, ctx) -> tuple[dict[str, str], dict[str, str]]:
    """(relative path -> digest, step inputs: path -> digest) of every file under root, digested
    once."""
    files = {f.as_posix(): ctx.digest(root / f) for f in tree_files(root)}
    return files, {str(root / rel): digest for rel, digest in files.items()}


def split_tree(files: dict[str, str], inputs: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """(the step's other inputs, the directory holding `files`) where files (relative path ->
    sha256) is a tree hashed into a step beside its checkpoint; None when the step's inputs do not
    hold it."""
    mine = {
        p: rel
        for p, sha in inputs.items()
        for rel, want in files.items()
        if sha == want and Path(p).as_posix().endswith("/" + rel)
    }
    if not mine:
        return inputs, None
    p, rel = next(iter(mine.items()))
    return {q: v for q, v in inputs.items() if q not in mine}, Path(p).as_posix()[: -len(rel) - 1]


def draft_checkpoint_dir(
    loaded: LoadedRecipe, recipe_dir, key: tuple[str, str], loads: str
) -> Path:
    """The draft checkpoint directory the recipe names at key; it must hold config.json (loads: who
    loads it as what, for the message)."""
    d = recipe_dir(loaded, getattr(loaded.recipe.speculative, key[1]), key)
    if not (d / "config.json").is_file():
        raise PlanError(
            f"{'.'.join(key)} {d} has no config.json: {loads} as a Hugging Face checkpoint",
            where=loaded.where(key),
            hint="point it at the draft checkpoint directory (save_pretrained)",
        )
    return d
