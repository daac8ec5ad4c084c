"""The checkpoint and tokenizer an LLM recipe names, as every LLM runtime reads them at plan time:
directories resolved against the recipe's, a remote checkpoint fetched once into the build cache
under its pin, config.json read into an Architecture, every file digested (regular files only) and
the tree checked against `checkpoint.sha256`. A recipe here is any with `checkpoint`
(recipe.models.Checkpoint); `read_tokenizer` also reads its `tokenizer` key."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tritonbuild.backends.base import PlanContext
from tritonbuild.backends.llm.memory import Architecture
from tritonbuild.core.hashing import sha256_json, tree_files
from tritonbuild.core.paths import PathProblem, check_tree
from tritonbuild.core.stores import is_url
from tritonbuild.errors import PlanError
from tritonbuild.recipe.load import LoadedRecipe

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "generation_config.json",
)


def _resolve(loaded: LoadedRecipe, rel: str, loc: tuple, *, directory: bool) -> Path:
    """A recipe path (relative to the recipe's directory) that must exist; `directory` asks for a
    directory."""
    path = Path(rel)
    path = path if path.is_absolute() else loaded.base_dir / path
    if not (path.is_dir() if directory else path.exists()):
        raise PlanError(
            f"{'directory ' if directory else ''}not found: {path}",
            where=loaded.where(loc),
            hint="fix the path (relative paths start at the recipe's directory)",
        )
    return path


def recipe_dir(loaded: LoadedRecipe, rel: str, loc: tuple) -> Path:
    """A directory the recipe names (relative to the recipe file), or a plan error at loc."""
    return _resolve(loaded, rel, loc, directory=True)


def recipe_path(loaded: LoadedRecipe, rel: str, loc: tuple) -> Path:
    """A file or directory the recipe names (relative to the recipe file), or a plan error at
    loc."""
    return _resolve(loaded, rel, loc, directory=False)


def fetch_checkpoint(loaded: LoadedRecipe, ctx: PlanContext) -> Path:
    """A remote checkpoint (any fsspec URL), downloaded once into the build cache (ctx.cache_dir)
    under its pin."""
    from tritonbuild.core.secrets import redact
    from tritonbuild.core.stores import open_url

    r = loaded.recipe
    if not r.checkpoint.sha256:
        raise PlanError(
            f"{redact(r.checkpoint.path)} is remote and not pinned",
            where=loaded.where(("checkpoint", "path")),
            hint="add checkpoint.sha256 (tritonbuild plan --json on a local copy shows it)",
        )
    dest = ctx.cache_dir / "checkpoints" / r.checkpoint.sha256
    if not (dest / "config.json").is_file():
        tmp = dest.with_name(dest.name + f".part-{os.getpid()}")
        try:
            fs, root = open_url(r.checkpoint.path)
            fs.get(root.rstrip("/") + "/", str(tmp) + "/", recursive=True)
        except Exception as e:  # noqa: BLE001 - any driver failure: a plan error with the driver's words
            shutil.rmtree(tmp, ignore_errors=True)
            raise PlanError(
                f"cannot fetch {r.checkpoint.path}: {redact(str(e))}",
                where=loaded.where(("checkpoint", "path")),
                hint="check the URL and credentials",
            ) from None
        if dest.exists():  # another process won the race: keep its copy
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            os.replace(tmp, dest)
    return dest


def tree_digest(files: dict[str, str]) -> str:
    return sha256_json(dict(sorted(files.items())))


def read_checkpoint(loaded: LoadedRecipe, ctx: PlanContext) -> tuple[Path, dict, dict[str, str]]:
    """(directory, its config.json, rel path → sha256), checked against the recipe's pin."""
    r = loaded.recipe
    ckpt = (
        fetch_checkpoint(loaded, ctx)
        if is_url(r.checkpoint.path)
        else recipe_dir(loaded, r.checkpoint.path, ("checkpoint", "path"))
    )
    cfg_path = ckpt / "config.json"
    if not cfg_path.is_file():
        raise PlanError(
            f"{ckpt} has no config.json: not a Hugging Face checkpoint",
            where=loaded.where(("checkpoint", "path")),
            hint="point checkpoint.path at the directory holding config.json and the weights",
        )
    try:
        config = json.loads(cfg_path.read_text())
        Architecture.from_hf_config(config)
    except (ValueError, KeyError) as e:
        raise PlanError(
            f"{cfg_path} is not a usable model config ({type(e).__name__}: {e})",
            where=loaded.where(("checkpoint", "path")),
            hint="check the checkpoint",
        ) from None
    rels = tree_files(ckpt)
    try:
        # NOTE: a FIFO would block hashing; a link to /dev/zero would never end
        check_tree(ckpt, rels)
    except PathProblem as e:
        raise PlanError(
            str(e),
            where=loaded.where(("checkpoint", "path")),
            hint="a checkpoint holds regular files (symlinks only to files inside it)",
        ) from None
    files = {rel.as_posix(): ctx.digest(ckpt / rel) for rel in rels}
    pin = r.checkpoint.sha256
    if pin and pin != tree_digest(files):
        if is_url(r.checkpoint.path):
            shutil.rmtree(ckpt, ignore_errors=True)  # a bad download must not be reused
        raise PlanError(
            f"checkpoint {ckpt} has digest {tree_digest(files)}, the recipe pins {pin}",
            where=loaded.where(("checkpoint", "sha256")),
            hint="restore the pinned checkpoint, or update checkpoint.sha256 if the change is "
            "intended",
        )
    return ckpt, config, files


def read_tokenizer(
    loaded: LoadedRecipe, ckpt: Path, ctx: PlanContext
) -> tuple[Path, dict[str, str]]:
    r = loaded.recipe
    tok = recipe_dir(loaded, r.tokenizer, ("tokenizer",)) if r.tokenizer else ckpt
    present = {name: ctx.digest(tok / name) for name in TOKENIZER_FILES if (tok / name).is_file()}
    if "tokenizer.json" not in present and "tokenizer.model" not in present:
        raise PlanError(
            f"{tok} has neither tokenizer.json nor a sentencepiece tokenizer.model (found: "
            f"{sorted(present) or 'no tokenizer files'})",
            where=loaded.where(("tokenizer",) if r.tokenizer else ("checkpoint", "path")),
            hint="save the tokenizer with tokenizer.save_pretrained(DIR) and set 'tokenizer: DIR'",
        )
    return tok, present
