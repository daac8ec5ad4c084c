"""assemble(): materialise files from the store into a staging tree, check it, then swap it into place."""

from __future__ import annotations

import os
import shutil
from functools import partial
from pathlib import Path

from builder.backends import backend_for
from builder.core.cas import Store
from builder.core.fsutil import replace_dir, write_atomic
from builder.core.hashing import sha256_file, sha256_json, tree_files
from builder.errors import BuildError, UsageError
from builder.plan.planner import display_path
from builder.repository.config import build_model_config, render
from builder.repository.manifest import MANIFEST_NAME, NOT_IN_MANIFEST, Manifest, ManifestModel
from builder.repository.rules import check_model_dir
from builder.steps.models import BuildResult, BuiltModel, FileEntry


def golden_name(version: int) -> str:
    return f"golden-v{version}.npz"


def check_out_dir(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a directory", hint="choose another -o path")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST_NAME).is_file() and not force:
        raise UsageError(f"{out} exists and is not a tritonbuild repository (no {MANIFEST_NAME})",
                         hint="choose an empty or new -o path, or pass --force to replace it")


def _goldens(bm: BuiltModel, model_dir: Path) -> tuple[str | None, str | None]:
    rel = bm.plan.recipe.verify.goldens
    if rel is None:
        return None, None
    src = Path(bm.plan.recipe_dir) / rel
    source = display_path(src)
    if not src.is_file():
        return None, source
    pin = src.with_name(src.name + ".sha256")
    if pin.is_file() and pin.read_text().split()[0] != sha256_file(src):
        raise BuildError(f"golden file {source} does not match {pin.name}", where=bm.plan.recipe_path,
                         hint="re-record goldens with 'tritonbuild verify OUT --record', or restore the file")
    dest = model_dir / golden_name(bm.plan.version)
    shutil.copyfile(src, dest)
    return f"{bm.plan.name}/{dest.name}", source


def _write_model(store: Store, bm: BuiltModel, root: Path, configs: dict[str, tuple[int, bytes]]) -> ManifestModel:
    mp, recipe = bm.plan, bm.plan.recipe
    model_dir = root / mp.name
    vdir = model_dir / str(mp.version)
    for rel, entry in bm.files.items():
        store.materialize(entry.sha256, vdir / rel)
    backend = backend_for(mp.backend)
    config = render(build_model_config(recipe, bm.inputs, bm.outputs, backend))
    if mp.name in configs and configs[mp.name][1] != config:
        raise BuildError(f"model {mp.name!r}: versions {configs[mp.name][0]} and {mp.version} need different "
                         "config.pbtxt files, and Triton has one per model", where=mp.recipe_path,
                         hint="make the recipes agree on everything but the source, or give them distinct names")
    configs[mp.name] = (mp.version, config)
    write_atomic(model_dir / "config.pbtxt", config)
    goldens, goldens_source = _goldens(bm, model_dir)
    return ManifestModel(
        name=mp.name, version=mp.version, backend=mp.backend, target=recipe.target, recipe_path=mp.recipe_path,
        recipe_sha256=mp.recipe_digest,
        model_identity=sha256_json({k: v.sha256 for k, v in bm.files.items()}),
        inputs=bm.inputs, outputs=bm.outputs, max_batch_size=recipe.max_batch_size, verify=recipe.verify,
        goldens=goldens, goldens_source=goldens_source, steps={s.kind: s.cache_key for s in mp.steps})


def _manifest_model(bm: BuiltModel, **fields) -> ManifestModel:
    """ManifestModel for one Triton model of a group emitted by a backend; provenance from bm."""
    mp = bm.plan
    return ManifestModel(recipe_path=mp.recipe_path, recipe_sha256=mp.recipe_digest, verify=mp.recipe.verify,
                         steps={s.kind: s.cache_key for s in mp.steps}, **fields)


def write_manifest(root: Path, toolchain: dict, models: list[ManifestModel]) -> Manifest:
    files = {}
    for rel in tree_files(root):
        if rel.as_posix() in NOT_IN_MANIFEST:
            continue
        path = root / rel
        files[rel.as_posix()] = FileEntry(sha256=sha256_file(path), size=path.stat().st_size)
    manifest = Manifest(toolchain=toolchain, models=sorted(models, key=lambda m: (m.name, m.version)), files=files)
    write_atomic(root / MANIFEST_NAME, manifest.to_bytes())
    return manifest


def assemble(result: BuildResult, out: Path, *, force: bool = False) -> Manifest:
    """Write the repository for result at out. Nothing at out changes unless every check passes."""
    check_out_dir(out, force)
    store = Store(Path(result.store))
    staging = out.parent / f".{out.name}.staging-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        configs: dict[str, tuple[int, bytes]] = {}
        models = []
        for bm in result.models:
            backend = backend_for(bm.plan.backend)
            if hasattr(backend, "emit"):
                models.extend(backend.emit(bm, staging, store, partial(_manifest_model, bm)))
            else:
                models.append(_write_model(store, bm, staging, configs))
        failed = [f for m in sorted({m.name for m in models}) for f in check_model_dir(staging / m) if not f.ok]
        if failed:
            raise BuildError("the generated repository breaks Triton's load rules: " +
                             "; ".join(f"{f.model}: {f.check}: {f.detail}" for f in failed),
                             hint="this is a tritonbuild bug if the recipe validated; please report it")
        manifest = write_manifest(staging, result.toolchain, models)
        replace_dir(staging, out)
        return manifest
    finally:
        shutil.rmtree(staging, ignore_errors=True)
