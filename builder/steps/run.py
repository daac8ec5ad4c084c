"""build(): for each planned step, reuse its record from the store or run it in a fresh workdir."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from builder.backends import backend_for
from builder.core.cas import Store
from builder.core.hashing import tree_files
from builder.errors import BuildError
from builder.plan.models import ModelPlan, Plan, PlannedStep
from builder.steps.models import BuildResult, BuiltModel, FileEntry, StepOutcome

Progress = Callable[[str], None]


def _run_step(store: Store, mp: ModelPlan, step: PlannedStep) -> tuple[dict[str, FileEntry], StepOutcome]:
    t0 = time.perf_counter()
    record = store.get_record(step.cache_key)
    if record is not None:
        files = {k: FileEntry(**v) for k, v in record["files"].items()}
        return files, StepOutcome(kind=step.kind, cache_key=step.cache_key, status="cached",
                                  reason="same inputs, params and toolchain", seconds=time.perf_counter() - t0)
    work = Path(tempfile.mkdtemp(prefix=f"tb-{mp.name}-", dir=store.root / "tmp"))
    try:
        out = work / "out"
        out.mkdir()
        backend_for(mp.backend).run_step(step.kind, step.params, step.inputs, Path(mp.recipe_dir), out,
                                         store.root / "logs" / step.cache_key[:16])
        files = {}
        for rel in tree_files(out):
            digest, size = store.put_file(out / rel)
            files[rel.as_posix()] = FileEntry(sha256=digest, size=size)
        store.put_record(step.cache_key, {"kind": step.kind, "model": mp.name,
                                          "files": {k: v.model_dump() for k, v in files.items()}})
    except BuildError as e:
        raise BuildError(f"model {mp.name!r}: step {step.kind}: {e.message}", where=e.where or mp.recipe_path,
                         hint=e.hint) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return files, StepOutcome(kind=step.kind, cache_key=step.cache_key, status="built", reason="no cache entry",
                              seconds=time.perf_counter() - t0)


def build(plan: Plan, store: Store, progress: Progress | None = None) -> BuildResult:
    (store.root / "tmp").mkdir(parents=True, exist_ok=True)
    models = []
    for mp in plan.models:
        files: dict[str, FileEntry] = {}
        outcomes = []
        for step in mp.steps:
            if progress:
                progress(f"{mp.name}: {step.kind}")
            step_files, outcome = _run_step(store, mp, step)
            files.update(step_files)
            outcomes.append(outcome)
        backend = backend_for(mp.backend)
        try:
            inputs, outputs = backend.derive_io(mp.recipe, {k: store.blob_path(v.sha256) for k, v in files.items()})
        except BuildError as e:
            raise BuildError(f"model {mp.name!r}: {e.message}", where=mp.recipe_path, hint=e.hint) from None
        models.append(BuiltModel(plan=mp, files=dict(sorted(files.items())), inputs=inputs, outputs=outputs,
                                 steps=outcomes))
    return BuildResult(store=str(store.root), toolchain=plan.toolchain, models=models)
