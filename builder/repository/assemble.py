"""assemble(): materialise files from the store into a staging tree, check it, then swap it into
place."""

from __future__ import annotations

import os
import shutil
import zipfile
from functools import partial
from pathlib import Path

from tritonbuild.backends import REGISTRY
from tritonbuild.core.cas import FileEntry, Store
from tritonbuild.core.fsutil import replace_dir, write_atomic
from tritonbuild.core.hashing import sha256_file, sha256_json, tree_files
from tritonbuild.core.numerics import portable_env
from tritonbuild.core.paths import (
    PathProblem,
    contains,
    display_path,
    inside,
    overlaps,
    regular_file,
)
from tritonbuild.errors import BuildError, UsageError
from tritonbuild.recipe.models import TensorSpec
from tritonbuild.repository.config import build_model_config, place_labels
from tritonbuild.repository.manifest import MANIFEST_NAME, NOT_IN_MANIFEST, Manifest, ManifestModel
from tritonbuild.repository.rules import check_model_dir
from tritonbuild.steps.models import BuildResult, BuiltModel
from tritonbuild.triton.config import render, write_config


def golden_name(version: int) -> str:
    return f"golden-v{version}.npz"


def check_out_dir(out: Path, force: bool) -> None:
    """OUT may be replaced only when it is new, empty, provably ours (a manifest that parses and
    lists exactly the files on disk), or --force says so; a file, or a symlink to one, never."""
    if out.is_symlink() and not out.exists():
        raise UsageError(f"{out} is a dangling symlink", hint="remove it or choose another -o path")
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a directory", hint="choose another -o path")
    if not out.is_dir() or force or not any(out.iterdir()):
        return
    why = not_ours(out)
    if why:
        raise UsageError(
            f"{out} exists and is not a tritonbuild repository ({why}); building would delete "
            "what it holds",
            where=str(out),
            hint="choose an empty or new -o path, move the directory away, or pass --force to "
            "replace it and everything in it",
        )


def not_ours(out: Path) -> str | None:
    """Why the non-empty directory out is not provably a repository we wrote, or None when it is."""
    from tritonbuild.repository.manifest import read_manifest

    if not (out / MANIFEST_NAME).is_file():
        return f"no {MANIFEST_NAME}"
    try:
        manifest = read_manifest(out)
    except (OSError, ValueError) as e:
        return f"{MANIFEST_NAME} does not parse: {str(e).splitlines()[0]}"
    listed = set(manifest.files) | NOT_IN_MANIFEST
    dirs = {
        parent for file in manifest.files for parent in Path(file).parents if parent != Path(".")
    }
    for dirpath, dirnames, filenames in os.walk(out):
        base = Path(dirpath).relative_to(out)
        for dirname in dirnames:
            rel = base / dirname
            if dirname != "__pycache__" and (rel not in dirs or (out / rel).is_symlink()):
                return f"{rel.as_posix()}/ is not in its manifest"
        dirnames[:] = [
            dirname
            for dirname in dirnames
            if dirname != "__pycache__" and not (Path(dirpath) / dirname).is_symlink()
        ]
        for name in filenames:
            rel = (base / name).as_posix()
            if rel not in listed:
                return f"{rel} is not in its manifest"
    return None


def check_out_overlap(
    out: Path, held: dict[Path, str], around: dict[Path, str] | None = None
) -> None:
    """Refuse an OUT that is or holds an input in held (recipes, their directories, sources,
    goldens), or that overlaps a tree in around (checkpoints, the build cache) either way: replacing
    OUT would delete it. Symlinks are resolved first; --force does not change this."""

    def hit(test, candidate: Path) -> bool:
        try:
            return test(out, candidate)
        except PathProblem:  # a path that cannot exist (a NUL byte): nothing there to replace
            return False

    for path, what in [
        *((candidate, w) for candidate, w in held.items() if hit(contains, candidate)),
        *((candidate, w) for candidate, w in (around or {}).items() if hit(overlaps, candidate)),
    ]:
        raise UsageError(
            f"-o {out} overlaps {what} {path}: building would replace it",
            where=str(out),
            hint="choose an -o path outside every recipe directory, source, golden file, "
            "checkpoint and the build cache",
        )


def _goldens(built: BuiltModel, model_dir: Path) -> tuple[str | None, str | None]:
    rel = built.plan.recipe.verify.goldens
    if rel is None:
        return None, None
    try:
        src = inside(Path(built.plan.recipe_dir), rel, "verify.goldens")
    except PathProblem as e:
        raise BuildError(
            str(e), where=built.plan.recipe_path, hint="name a file in the recipe's directory"
        ) from None
    source = display_path(src)
    if not src.exists():
        return None, source
    try:
        regular_file(src, "golden file")
    except PathProblem as e:
        raise BuildError(
            str(e), where=built.plan.recipe_path, hint="verify.goldens must name a .npz file"
        ) from None
    pin = src.with_name(src.name + ".sha256")
    if pin.is_file() and pin.read_text().split()[0] != sha256_file(src):
        raise BuildError(
            f"golden file {source} does not match {pin.name}",
            where=built.plan.recipe_path,
            hint="re-record goldens with 'tritonbuild verify OUT --record', or restore the file",
        )
    dest = model_dir / golden_name(built.plan.version)
    shutil.copyfile(src, dest)
    return f"{built.plan.name}/{dest.name}", source


def _golden_warmup(built: BuiltModel, model_dir: Path, goldens: str | None, config: bytes) -> bytes:
    """Warmup inputs = the first golden sample, as raw files in <model>/warmup/ (Triton's
    layout)."""
    from tritonbuild.repository.config import add_warmup
    from tritonbuild.triton.config import model_config_pb2, parse

    recipe = built.plan.recipe
    arrays = _golden_arrays(built, model_dir, goldens)
    files = {}
    for tensor in built.inputs:
        shape, raw = _warmup_tensor(built, tensor, arrays.get(f"input.0.{tensor.name}"))
        (model_dir / "warmup").mkdir(exist_ok=True)
        write_atomic(inside(model_dir / "warmup", tensor.name, "tensor name"), raw)
        files[tensor.name] = (shape, tensor.name)
    model_config = parse(config)
    add_warmup(
        model_config,
        recipe.warmup,
        built.inputs,
        recipe.verify.dynamic_size,
        model_config_pb2(),
        files,
    )
    return render(model_config)


def _golden_arrays(built: BuiltModel, model_dir: Path, goldens: str | None) -> dict:
    """The recorded goldens' arrays by name; a BuildError where none are recorded or the file is not
    a readable .npz."""
    from tritonbuild.core.npz import read_npz

    recipe = built.plan.recipe
    if goldens is None:
        raise BuildError(
            f"model {recipe.name!r}: warmup.data is goldens but no goldens are recorded",
            where=built.plan.recipe_path,
            hint="run 'tritonbuild verify OUT --record' first, or use warmup.data: zero",
        )
    try:
        return read_npz(model_dir.parent / goldens)
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as e:
        raise BuildError(
            f"model {recipe.name!r}: golden file {built.plan.recipe.verify.goldens} is not a "
            f"readable .npz ({type(e).__name__}: {e}): it cannot be warmup data",
            where=built.plan.recipe_path,
            hint="re-record goldens with 'tritonbuild verify OUT --record', or use warmup.data: "
            "zero",
        ) from None


def _warmup_tensor(built: BuiltModel, tensor: TensorSpec, arr) -> tuple[list[int], bytes]:
    """(shape, raw bytes in Triton's warmup file layout) of the first golden sample of one input; a
    BuildError where the golden is missing or its shape is not the config's."""
    import numpy as np

    recipe = built.plan.recipe
    shape = (
        list(arr.shape[1:] if recipe.max_batch_size > 0 else arr.shape) if arr is not None else None
    )
    if (
        arr is None
        or len(shape) != len(tensor.dims)
        or any(dim not in (-1, size) for dim, size in zip(tensor.dims, shape, strict=True))
    ):
        raise BuildError(
            f"model {recipe.name!r}: golden input {tensor.name!r} has shape {shape}, the config "
            f"says {tensor.dims}: it cannot be warmup data",
            where=built.plan.recipe_path,
            hint="re-record goldens for the current inputs, or use warmup.data: zero",
        )
    if tensor.dtype == "bytes":
        raw = b"".join(
            len(x).to_bytes(4, "little") + bytes(x) for x in arr.reshape(-1)[: int(np.prod(shape))]
        )
    else:
        raw = np.ascontiguousarray(arr[0] if recipe.max_batch_size > 0 else arr).tobytes()
    return shape, raw


def _write_model(
    store: Store,
    built: BuiltModel,
    root: Path,
    configs: dict[str, tuple[int, bytes]],
    known: dict[str, FileEntry],
) -> ManifestModel:
    model_plan, recipe = built.plan, built.plan.recipe
    model_dir = root / model_plan.name
    vdir = model_dir / str(model_plan.version)
    for rel, entry in built.files.items():
        store.materialize(entry.sha256, vdir / rel)
        known[f"{model_plan.name}/{model_plan.version}/{rel}"] = entry
    backend = REGISTRY.get(model_plan.backend)
    config = render(build_model_config(recipe, built.inputs, built.outputs, backend))
    if model_plan.name in configs and configs[model_plan.name][1] != config:
        raise BuildError(
            f"model {model_plan.name!r}: versions {configs[model_plan.name][0]} and "
            f"{model_plan.version} need different config.pbtxt files, and Triton has one per model",
            where=model_plan.recipe_path,
            hint="make the recipes agree on everything but the source, or give them distinct names",
        )
    configs[model_plan.name] = (model_plan.version, config)
    write_config(model_dir, config)
    place_labels(store, model_plan, model_dir, known)
    goldens, goldens_source = _goldens(built, model_dir)
    if recipe.warmup is not None and recipe.warmup.data == "goldens":
        config = _golden_warmup(built, model_dir, goldens, config)
        write_config(model_dir, config)
    return ManifestModel(
        name=model_plan.name,
        version=model_plan.version,
        backend=backend.triton_backend,
        target=recipe.target,
        recipe_path=model_plan.recipe_path,
        recipe_sha256=model_plan.recipe_digest,
        model_identity=sha256_json({k: v.sha256 for k, v in built.files.items()}),
        inputs=built.inputs,
        outputs=built.outputs,
        max_batch_size=recipe.max_batch_size,
        verify=recipe.verify,
        goldens=goldens,
        goldens_source=goldens_source,
        steps={step.kind: step.cache_key for step in model_plan.steps},
        numerics=_numerics(recipe),
    )


def _numerics(recipe) -> dict | None:
    """A portable recipe's settings and the variables that carry them (core/numerics)."""
    numerics = getattr(recipe, "numerics", None)
    if numerics is None or numerics.mode == "native":
        return None
    return {
        **numerics.model_dump(mode="json"),
        "env": portable_env(numerics.cpus, numerics.threads),
    }


def _manifest_model(built: BuiltModel, **fields) -> ManifestModel:
    """ManifestModel for one Triton model of a group emitted by a backend; provenance from built."""
    model_plan = built.plan
    return ManifestModel(
        recipe_path=model_plan.recipe_path,
        recipe_sha256=model_plan.recipe_digest,
        verify=model_plan.recipe.verify,
        steps={step.kind: step.cache_key for step in model_plan.steps},
        **fields,
    )


def write_manifest(
    root: Path,
    toolchain: dict,
    models: list[ManifestModel],
    known: dict[str, FileEntry] | None = None,
) -> Manifest:
    """Every file with sha256 and size. known: digests already established (files materialised from
    the store, whose names are their sha256), so multi-GB artifacts are not hashed again."""
    files = {}
    known = known or {}
    for rel in tree_files(root):
        key = rel.as_posix()
        if key in NOT_IN_MANIFEST:
            continue
        path = root / rel
        size = path.stat().st_size
        entry = known.get(key)
        files[key] = (
            entry
            if entry is not None and entry.size == size
            else FileEntry(sha256=sha256_file(path), size=size)
        )
    manifest = Manifest(
        toolchain=toolchain,
        models=sorted(models, key=lambda model: (model.name, model.version)),
        files=files,
    )
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
        known: dict[str, FileEntry] = {}
        models = []
        # NOTE: compositions last: they are checked against the models they call.
        ordered = sorted(
            result.models, key=lambda built: REGISTRY.get(built.plan.backend).needs_built_models
        )
        for built in ordered:
            backend = REGISTRY.get(built.plan.backend)
            if any(outcome.status == "skipped" for outcome in built.steps) and not backend.emits:
                continue  # a step that could not run here: nothing to assemble (build reported why)
            if backend.emits:
                emitted = backend.emit(
                    built,
                    staging,
                    store,
                    partial(_manifest_model, built),
                    {model.name: model for model in models},
                )
                if (
                    len(emitted) == 1 and emitted[0].name == built.plan.name
                ):  # goldens travel as for any model
                    goldens, source = _goldens(built, staging / built.plan.name)
                    emitted = [
                        emitted[0].model_copy(update={"goldens": goldens, "goldens_source": source})
                    ]
                models.extend(emitted)
            else:
                models.append(_write_model(store, built, staging, configs, known))
        failed = [
            finding
            for name in sorted({model.name for model in models})
            for finding in check_model_dir(staging / name)
            if not finding.ok
        ]
        if failed:
            raise BuildError(
                "the generated repository breaks Triton's load rules: "
                + "; ".join(
                    f"{finding.model}: {finding.check}: {finding.detail}" for finding in failed
                ),
                hint="this is a tritonbuild bug if the recipe validated; please report it",
            )
        manifest = write_manifest(staging, result.toolchain, models, known)
        replace_dir(staging, out)
        return manifest
    finally:
        shutil.rmtree(staging, ignore_errors=True)
