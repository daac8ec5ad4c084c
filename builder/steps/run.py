"""build(): for each planned step, reuse its record from the store or run it in a fresh
workdir."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from tritonbuild.backends import REGISTRY, StepContext, StepSkipped
from tritonbuild.core.cas import Store
from tritonbuild.core.fsutil import write_atomic
from tritonbuild.core.hashing import pretty_json, sha256_json, tree_files
from tritonbuild.core.paths import PathProblem, check_tree
from tritonbuild.errors import BuildError
from tritonbuild.plan.models import ModelPlan, Plan, PlannedStep
from tritonbuild.plan.planner import key_material
from tritonbuild.recipe.models import TensorSpec
from tritonbuild.steps.models import BuildResult, BuiltModel, FileEntry, StepOutcome

Progress = Callable[[str], None]


def _outcome(step: PlannedStep, status: str, reason: str, t0: float) -> StepOutcome:
    return StepOutcome(
        kind=step.kind,
        cache_key=step.cache_key,
        status=status,
        reason=reason,
        seconds=time.perf_counter() - t0,
    )


def _prebuilt(
    store: Store, model_plan: ModelPlan, step: PlannedStep, path: Path, t0: float
) -> tuple[dict[str, FileEntry], StepOutcome]:
    """A step output made elsewhere (e.g. an engine from a GPU CI job): its files go into the store
    as given."""
    if not path.is_dir():
        raise BuildError(
            f"--engine {path}: not a directory", hint="pass the directory the engine build wrote"
        )
    files = {}
    prefix = REGISTRY.get(model_plan.backend).prebuilt_prefix
    prefix = step.kind.split(".", 1)[1] + "/" if prefix is None else prefix
    rels = tree_files(path)
    try:
        # NOTE: a FIFO would block the copy; a link to /dev/zero would never end
        check_tree(path, rels)
    except (PathProblem, OSError) as e:
        raise BuildError(
            f"--engine {path}: {e}",
            hint="an engine directory holds regular files (symlinks only to files inside it)",
        ) from None
    for rel in rels:
        digest, size = store.put_file(path / rel)
        files[f"{prefix}{rel.as_posix()}"] = FileEntry(sha256=digest, size=size)
    return files, _outcome(step, "prebuilt", f"--engine {path}", t0)


def _run_step(
    store: Store,
    model_plan: ModelPlan,
    step: PlannedStep,
    toolchain: dict[str, str],
    prebuilt: Path | None = None,
    remote=None,
) -> tuple[dict[str, FileEntry], StepOutcome]:
    """The step's files and outcome: given (--engine), cached (here or in the remote cache), or
    built now and recorded."""
    t0 = time.perf_counter()
    if prebuilt is not None:
        return _prebuilt(store, model_plan, step, prebuilt, t0)
    material = key_material(step.kind, step.params, step.inputs, toolchain)
    record = store.get_record(step.cache_key)
    where = "same inputs, params and toolchain"
    if record is None and remote is not None:
        record = remote.pull(store, step.cache_key) and store.get_record(step.cache_key)
        where = "remote cache: same inputs, params and toolchain"
    if record is not None:
        files = {k: FileEntry(**v) for k, v in record["files"].items()}
        return files, _outcome(step, "cached", where, t0)
    reason = _why_rebuild(store, model_plan, step, material)
    try:
        files = _execute(store, model_plan, step, material)
        if remote is not None:
            remote.push(store, step.cache_key)
    except StepSkipped as e:
        return {}, _outcome(step, "skipped", str(e), t0)
    except BuildError as e:
        raise BuildError(
            f"model {model_plan.name!r}: step {step.kind}: {e.message}",
            where=e.where or model_plan.recipe_path,
            hint=e.hint,
        ) from None
    return files, _outcome(step, "built", reason, t0)


def _execute(
    store: Store, model_plan: ModelPlan, step: PlannedStep, material: dict
) -> dict[str, FileEntry]:
    """Run the step in a fresh workdir, move its outputs into the store and record them."""
    # NOTE: the name is cut: a model name may use all of NAME_MAX (255 bytes), the prefix must
    # leave room
    work = Path(tempfile.mkdtemp(prefix=f"tb-{model_plan.name[:64]}-", dir=store.root / "tmp"))
    try:
        out = work / "out"
        out.mkdir()
        REGISTRY.get(model_plan.backend).run_step(
            StepContext(
                kind=step.kind,
                params=step.params,
                inputs=step.inputs,
                out=out,
                log_dir=store.root / "logs" / step.cache_key[:16],
                shared_dir=store.root,
                timeout_s=step.timeout_s,
            )
        )
        files = {}
        for rel in tree_files(out):
            # the workdir goes: its files move, uncopied
            digest, size = store.put_file(out / rel, move=True)
            files[rel.as_posix()] = FileEntry(sha256=digest, size=size)
        store.put_record(
            step.cache_key,
            {
                "kind": step.kind,
                "model": model_plan.name,
                "material": material,
                "files": {k: v.model_dump() for k, v in files.items()},
            },
        )
        store.put_index(model_plan.name, step.kind, step.cache_key)
        return files
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _why_rebuild(store: Store, model_plan: ModelPlan, step: PlannedStep, material: dict) -> str:
    """Compare with the last build of the same model and step: which part of the key changed."""
    last_key = store.get_index(model_plan.name, step.kind)
    if last_key == step.cache_key:
        return "cache entry missing or corrupt"
    old = store.read_record(last_key) if last_key else None
    if not old or "material" not in old:
        return "first build (no cache entry)"
    before = old["material"]
    changes = []
    if before.get("params") != material["params"]:
        keys = sorted(
            k
            for k in set(before.get("params", {})) | set(material["params"])
            if before.get("params", {}).get(k) != material["params"].get(k)
        )
        changes.append("params " + ", ".join(keys))
    if before.get("inputs") != material["inputs"]:
        changes.append("input files")
    tc_old, tc_new = before.get("toolchain", {}), material["toolchain"]
    for k in sorted(set(tc_old) | set(tc_new)):
        if tc_old.get(k) != tc_new.get(k):
            changes.append(f"{k} {tc_old.get(k, '-')} → {tc_new.get(k, '-')}")
    return "changed: " + "; ".join(changes) if changes else "cache entry missing or corrupt"


def _usable(store: Store, warnings: list[str]) -> Store:
    """The store, or a temporary one (with a warning) when its directory cannot be written."""
    try:
        (store.root / "tmp").mkdir(parents=True, exist_ok=True)
        probe = store.root / "tmp" / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        return store
    except OSError as e:
        fallback = Path(tempfile.mkdtemp(prefix="tritonbuild-cache-"))
        (fallback / "tmp").mkdir()
        warnings.append(
            f"build cache {store.root} is not writable ({e.strerror}); using {fallback} for this "
            "run (set --cache-dir or TRITONBUILD_CACHE_DIR)"
        )
        return Store(fallback)


def _derived_io(
    store: Store, model_plan: ModelPlan, files: dict[str, FileEntry]
) -> tuple[list, list]:
    """The backend's derive_io, memoised in the store under everything it reads (the recipe, the
    built files' digests, the steps' cache keys: their inputs and toolchain). A no-op rebuild then
    loads no torch or onnx."""
    key = sha256_json(
        {
            "derive_io": model_plan.backend,
            "recipe": model_plan.recipe.model_dump(mode="json"),
            "files": {k: v.sha256 for k, v in sorted(files.items())},
            "steps": [step.cache_key for step in model_plan.steps],
        }
    )
    memo = store.root / "io" / key[:2] / f"{key}.json"
    try:
        cached = json.loads(memo.read_text())
        return (
            [TensorSpec.model_validate(tensor) for tensor in cached["inputs"]],
            [TensorSpec.model_validate(tensor) for tensor in cached["outputs"]],
        )
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        inputs, outputs = REGISTRY.get(model_plan.backend).derive_io(
            model_plan.recipe,
            {k: store.blob_path(v.sha256) for k, v in files.items()},
            recipe_dir=Path(model_plan.recipe_dir),
        )
    except ValidationError as e:
        # e.g. a graph input named 'a/b': not a tensor name a repository can hold
        problems = "; ".join(f"{err['msg']}" for err in e.errors())
        raise BuildError(
            f"model {model_plan.name!r}: the built model's inputs/outputs break Triton's naming "
            f"rules: {problems}",
            where=model_plan.recipe_path,
            hint="rename the tensors in the model (e.g. the export's input/output names)",
        ) from None
    with contextlib.suppress(OSError):  # a memo: never fail a build over it
        write_atomic(
            memo,
            pretty_json(
                {
                    "inputs": [tensor.model_dump(mode="json") for tensor in inputs],
                    "outputs": [tensor.model_dump(mode="json") for tensor in outputs],
                    "steps": [step.cache_key for step in model_plan.steps],
                }
            ),
        )  # for gc
    return inputs, outputs


def build(
    plan: Plan,
    store: Store,
    progress: Progress | None = None,
    *,
    engines: dict[str, Path] | None = None,
    strict: bool = False,
    cache_url: str | None = None,
    only: set[str] | None = None,
) -> BuildResult:
    """Run every step. engines: model name → prebuilt engine directory. strict: a skipped step is an
    error. cache_url: a shared remote cache. only: build just these models (the rest are left
    out)."""
    warnings: list[str] = []
    store = _usable(store, warnings)
    remote = None
    if cache_url:
        from tritonbuild.core.remote import RemoteCache

        remote = RemoteCache(cache_url, warnings.append)
    engines = dict(engines or {})
    _check_engines(plan, engines)
    models = [
        _build_model(store, model_plan, plan.toolchain, engines, strict, progress, remote)
        for model_plan in plan.models
        if only is None or model_plan.name in only
    ]
    return BuildResult(
        store=str(store.root), toolchain=plan.toolchain, models=models, warnings=warnings
    )


def _check_engines(plan: Plan, engines: dict[str, Path]) -> None:
    """--engine may name only a model whose recipe builds an engine."""
    unknown = sorted(
        set(engines)
        - {
            model_plan.name
            for model_plan in plan.models
            if any(REGISTRY.builds_engine(step.kind) for step in model_plan.steps)
        }
    )
    if unknown:
        raise BuildError(
            f"--engine names {unknown}, which no engine-building recipe defines",
            hint="use --engine MODEL=DIR with the recipe's name",
        )


def _build_model(
    store: Store,
    model_plan: ModelPlan,
    toolchain: dict[str, str],
    engines: dict[str, Path],
    strict: bool,
    progress: Progress | None,
    remote,
) -> BuiltModel:
    """One model's steps in order, then its inputs and outputs from what they built."""
    files: dict[str, FileEntry] = {}
    outcomes = []
    for step in model_plan.steps:
        if progress:
            progress(f"{model_plan.name}: {step.kind}")
        given = engines.get(model_plan.name) if REGISTRY.builds_engine(step.kind) else None
        step_files, outcome = _run_step(store, model_plan, step, toolchain, given, remote)
        if outcome.status == "skipped" and strict:
            raise BuildError(
                f"model {model_plan.name!r}: step {step.kind} skipped: {outcome.reason}",
                where=model_plan.recipe_path,
                hint="run on a machine that has the tool, or drop --strict",
            )
        files.update(step_files)
        outcomes.append(outcome)
    try:
        inputs, outputs = _derived_io(store, model_plan, files)
    except BuildError as e:
        raise BuildError(
            f"model {model_plan.name!r}: {e.message}", where=model_plan.recipe_path, hint=e.hint
        ) from None
    return BuiltModel(
        plan=model_plan,
        files=dict(sorted(files.items())),
        inputs=inputs,
        outputs=outputs,
        steps=outcomes,
    )
