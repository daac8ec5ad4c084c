"""What verify checks on one model's answers, through any runner (embedded or given tritonserver,
in-process): the goldens bit for bit over repeats, batch composition (samples alone vs concatenated
into one batch), and recording goldens (`verify --record`) beside the recipe or into the
repository."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from tritonbuild.backends import REGISTRY
from tritonbuild.core.fsutil import write_atomic
from tritonbuild.core.hashing import sha256_file
from tritonbuild.core.npz import read_npz, write_npz
from tritonbuild.core.paths import PathProblem, is_inside, regular_file
from tritonbuild.errors import VerifyError
from tritonbuild.repository.assemble import golden_name
from tritonbuild.repository.manifest import ManifestModel
from tritonbuild.triton.model_dir import ModelDir
from tritonbuild.verify.checked import AnswersChecked, Recording
from tritonbuild.verify.classes import matching_class, merged, model_files, verdict
from tritonbuild.verify.contract import contract_note, violations
from tritonbuild.verify.goldens import (
    check_golden_names,
    generate_inputs,
    goldens_arrays,
    mismatches,
    past_tolerance,
    read_goldens,
)
from tritonbuild.verify.models import Mismatch
from tritonbuild.verify.under_load import answers_under_load


def _concat_groups(samples: list[dict], limit: int) -> list[list[int]]:
    groups, cur = [], []
    for i in range(len(samples)):
        if cur and (
            len(cur) == limit
            or any(samples[i][k].shape != samples[cur[0]][k].shape for k in samples[i])
        ):
            groups.append(cur)
            cur = []
        cur.append(i)
    if cur:
        groups.append(cur)
    return [g for g in groups if len(g) > 1]


def _batch_invariance(
    model: ManifestModel, runner, inputs, reference
) -> tuple[str, str, list[Mismatch]]:
    if model.verify.batch_invariance == "skip":
        return "skipped", "batch_invariance: skip", []
    if model.max_batch_size == 0 or len(inputs) < 2:
        return (
            "not-applicable",
            "model does not batch" if model.max_batch_size == 0 else "one sample",
            [],
        )
    found: list[Mismatch] = []
    tolerance = model.verify.tolerance
    for group in _concat_groups(inputs, model.max_batch_size):
        batch = {k: np.concatenate([inputs[i][k] for i in group]) for k in inputs[group[0]]}
        got = runner.infer(batch)
        for row, i in enumerate(group):
            rows = {name: answer[row : row + 1] for name, answer in got.items()}
            context = f"batched with {len(group) - 1} others"
            found += past_tolerance(
                mismatches(reference[i], rows, sample=i, context=context, tolerance=tolerance)
            )
    for i, got in enumerate(runner.infer_concurrent(inputs)):
        context = "concurrent requests (dynamic batcher)"
        found += past_tolerance(
            mismatches(reference[i], got, sample=i, context=context, tolerance=tolerance)
        )
    if found:
        worst = max((mismatch.max_abs_diff or 0.0) for mismatch in found)
        return (
            "variant",
            f"{len(found)} output(s) changed when batched (max |diff| {worst:.3g})",
            found,
        )
    same = (
        "bit-identical"
        if not model.verify.tolerance
        else f"bit-identical ({', '.join(sorted(model.verify.tolerance))}: within tolerance)"
    )
    return (
        "invariant",
        f"{same} alone, in batches of up to {model.max_batch_size}, and under concurrency",
        [],
    )


def _repeat_mismatches(model: ManifestModel, runs, reference) -> list[Mismatch]:
    return [
        mismatch
        for rep, outs in enumerate(runs)
        for i, got in enumerate(outs)
        for mismatch in mismatches(
            reference[i],
            got,
            sample=i,
            context=f"repeat {rep + 1}",
            tolerance=model.verify.tolerance,
        )
    ]


def check_model(
    model: ManifestModel,
    runner,
    root: Path,
    record: bool,
    force: bool = False,
    numerics: dict | None = None,
    model_dir: ModelDir | None = None,
) -> AnswersChecked:
    """record: answers on the goldens' inputs become the goldens (of this machine class); with
    force, goldens that no longer fit the model (an input renamed, added or dropped) are recorded
    anew from fresh inputs (the result's recording). numerics: the fingerprint of the process that
    ran the model: the goldens of its machine class are compared, a difference told apart as another
    class or a changed model. model_dir: the model's directory as verify read it (by default root's)."""
    inputs, golden, refusal = _goldens(model, root, record, force)
    if refusal is not None:
        return AnswersChecked(passed=False, notes=[refusal])
    chosen, differ = matching_class(golden, numerics)
    reference = golden.classes[chosen].outputs if golden is not None else None
    runs = [[runner.infer(sample) for sample in inputs] for _ in range(model.verify.repeats)]
    if broken := _contract(model, runner, inputs, runs, model_dir or root):
        return _contract_broken(model, inputs, record, broken, numerics)
    mismatches = _repeat_mismatches(model, runs, runs[0] if record else reference)
    tolerated = [each for each in mismatches if each.within_tolerance]
    mismatches = past_tolerance(mismatches)
    # NOTE: batched answers are compared with this run's own unbatched ones, not the goldens: a
    # model that answers differently from its goldens is not thereby batch-variant
    under_load, first = None, runs[0] if runs else reference
    if model.max_batch_size == 0 and hasattr(runner, "infer_amid"):
        status, detail, variant, under_load = answers_under_load(model, runner, inputs, first)
    else:
        status, detail, variant = _batch_invariance(model, runner, inputs, first)
    notes = _tolerance_notes(model, tolerated)
    told, files = None, model_files(root, model)
    if golden is not None and not record:
        told = verdict(golden, chosen, differ, numerics, mismatches, files)
        notes += told.notes
    if status == "variant":
        if model.verify.batch_invariance == "require":
            mismatches.extend(variant)
        else:
            notes.append(_variance_note(detail, under_load is not None))
    return AnswersChecked(
        samples=len(inputs),
        repeats=model.verify.repeats,
        compared=sum(len(sample_outputs) for sample_outputs in runs[0]) * model.verify.repeats,
        mismatches=mismatches,
        tolerated=tolerated,
        batch_invariance=status,
        batch_detail=detail,
        passed=not mismatches,
        under_load=under_load,
        notes=notes,
        numerics=numerics,
        recording=Recording(inputs, runs[0], golden, numerics, files) if record else None,
        **(told.report_fields() if told else {}),
    )


def _contract(model: ManifestModel, runner, inputs, runs, model_dir: Path | ModelDir) -> list[str]:
    """Where the answers break the outputs config.pbtxt declares. None from a generative runner:
    its answers are JSON (the generate endpoint) made into arrays of the declared dtype, and carry
    no tensor dtype or shape of the model's."""
    if hasattr(runner, "infer_amid"):
        return []
    return sorted({found for outs in runs for found in violations(model, inputs, outs, model_dir)})


def _contract_broken(
    model: ManifestModel, inputs, record: bool, broken, numerics
) -> AnswersChecked:
    """A model whose answers break its config's declared outputs: failed, cause 'contract', never
    recorded (nor compared further: its goldens cannot say anything about it)."""
    note = contract_note(model, broken, record)
    return AnswersChecked(
        samples=len(inputs),
        repeats=model.verify.repeats,
        compared=0,
        passed=False,
        notes=[note],
        numerics=numerics,
        cause="contract",
        contract_violations=broken,
        goldens_refused=note if record else None,
    )


def _goldens(model: ManifestModel, root: Path, record: bool, force: bool):
    """(inputs, goldens, None) to check or record with, or (None, None, why not): no goldens and no
    --record, or goldens that no longer fit the model without --record --force. Recording without
    usable goldens: the backend's golden inputs, else generated ones (goldens None)."""
    if model.goldens and (root / model.goldens).is_file():
        try:
            golden = read_goldens(read_npz(root / model.goldens))
            for each in golden.classes:
                check_golden_names(model, golden.inputs, each.outputs)
            return golden.inputs, golden, None
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
            if not (record and force):
                fix = (
                    "'verify OUT --record --force' records new goldens from fresh inputs"
                    if record
                    else "if the model's tensors changed on purpose, 'verify OUT --record "
                    "--force' records new ones"
                )
                return (
                    None,
                    None,
                    f"goldens {model.goldens} are not usable for this model: "
                    f"{type(e).__name__}: {e}; {fix}",
                )
    if not record:
        return (
            None,
            None,
            "no goldens recorded: run 'tritonbuild verify OUT --record', commit the .npz, rebuild",
        )
    backend = REGISTRY.for_manifest(model.backend)
    inputs = (backend.golden_inputs(model) if backend is not None else None) or generate_inputs(
        model
    )
    return inputs, None, None


def _tolerance_notes(model: ManifestModel, tolerated: list[Mismatch]) -> list[str]:
    """Per output compared within its tolerance: the tolerance, and the largest difference."""
    notes = []
    for name in sorted({mismatch.output for mismatch in tolerated}):
        tolerance = model.verify.tolerance[name]
        worst = max(
            (mismatch.max_abs_diff or 0.0) for mismatch in tolerated if mismatch.output == name
        )
        notes.append(
            f"output {name!r}: within tolerance (atol {tolerance.atol:g}, rtol "
            f"{tolerance.rtol:g}, ulp {tolerance.ulp}); not bit-exact: max |diff| {worst:.3g}"
        )
    return notes


def _variance_note(detail: str, under_load: bool) -> str:
    """Answers that depend on what else is batched, where the recipe does not require invariance."""
    if under_load:
        return (
            f"answers depend on the other requests in flight ({detail}); set "
            "verify.batch_invariance: require to fail on this, and serve it invariant (a vLLM "
            "model: serving.determinism: invariant)"
        )
    return (
        "outputs depend on batch composition; set verify.batch_invariance: require to fail on "
        "this (and serve with a fixed batch shape)"
    )


def _golden_destination(model: ManifestModel) -> Path:
    """Where --record writes a recipe's goldens: a .npz inside the directory of the recipe the
    manifest names, and only while that recipe is the one built (same sha256). A manifest is a file
    anyone with write access can edit; without this, goldens_source: /etc/x would make --record
    write anywhere."""
    recipe, src = Path(model.recipe_path), Path(model.goldens_source)
    try:
        same = (
            regular_file(recipe, "recipe") is not None
            and sha256_file(recipe) == model.recipe_sha256
        )
    except (OSError, PathProblem):
        same = False
    if not same:
        raise VerifyError(
            f"model {model.name!r}: will not write goldens beside {recipe}: that recipe is missing "
            "or changed since the build",
            where=model.recipe_path,
            hint="run 'verify --record' from the directory you built in, after rebuilding",
        )
    if src.suffix != ".npz" or not is_inside(src, recipe.parent):
        raise VerifyError(
            f"model {model.name!r}: the manifest's goldens_source {src} is not a .npz inside the "
            f"recipe's directory {recipe.parent}: refusing to write there",
            where=model.recipe_path,
            hint="rebuild the repository (the manifest was edited)",
        )
    return src


def write_goldens(
    root: Path,
    model: ManifestModel,
    inputs,
    reference,
    golden=None,
    numerics=None,
    force=False,
    files=None,
) -> tuple[ManifestModel, str | None, str | None]:
    """Goldens into OUT, and into the recipe's verify.goldens (this machine class's answers, with
    the model files they came from; other classes' kept; a class's committed answers are replaced
    only with force): (model, a note, a refusal)."""
    joined, added, refusal = merged(golden, inputs, reference, numerics, force, files)
    if refusal is not None:
        return model, None, refusal
    arrays = goldens_arrays(joined)
    dest_rel = f"{model.name}/{golden_name(model.version)}"
    extra = [added] if added else []
    if not model.goldens_source:
        write_npz(root / dest_rel, arrays)
        model = model.model_copy(update={"goldens": dest_rel})
        return (
            model,
            "; ".join(
                [
                    *extra,
                    f"goldens recorded into {root / dest_rel} only: the next build replaces OUT; "
                    f"set verify.goldens in {model.recipe_path} (e.g. goldens/{model.name}.npz) "
                    "to keep them with the recipe",
                ]
            ),
            None,
        )
    src = _golden_destination(model)
    write_npz(root / dest_rel, arrays)
    model = model.model_copy(update={"goldens": dest_rel})
    new = (root / dest_rel).read_bytes()
    if not src.is_file() or src.read_bytes() != new:
        src.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(src, new)
        write_atomic(
            src.with_name(src.name + ".sha256"), f"{sha256_file(src)}  {src.name}\n".encode()
        )
    return (
        model,
        "; ".join([*extra, f"goldens recorded into {src} (commit it) and {root / dest_rel}"]),
        None,
    )
