"""Goldens per machine class: which class's answers a run is compared with (the one whose numerics
fingerprint matches the run's), why answers differ from them (another machine class, or the model
changed), and how a recording joins the classes already recorded."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from tritonbuild.core.numerics import differences, summary
from tritonbuild.repository.manifest import ManifestModel, read_manifest
from tritonbuild.verify.goldens import GoldenClass, Goldens, mismatches
from tritonbuild.verify.models import Mismatch


def matching_class(golden: Goldens | None, here: dict | None) -> tuple[int, list[str] | None]:
    """The machine class whose fingerprint matches this run's (no deciding field differs), else
    the first; and what differs from it (None: unknown, either fingerprint missing)."""
    if golden is None or here is None:
        return 0, None
    for k, each in enumerate(golden.classes):
        if each.numerics is not None and not differences(each.numerics, here):
            return k, []
    first = golden.classes[0].numerics
    return 0, (None if first is None else differences(first, here))


@dataclass(frozen=True)
class Verdict:
    """The report's fields on where the goldens came from, and why answers differ from them."""

    goldens_recorded_on: str
    goldens_classes: int
    notes: list[str] = field(default_factory=list)
    cause: str | None = None
    numerics_differ: list[str] | None = None

    def report_fields(self) -> dict:
        """The check's fields it sets (its notes are added to the check's own)."""
        return {
            "goldens_recorded_on": self.goldens_recorded_on,
            "goldens_classes": self.goldens_classes,
            "cause": self.cause,
            "numerics_differ": self.numerics_differ,
        }


def model_files(root: Path, model: ManifestModel) -> dict[str, str] | None:
    """The digests of the model's files as the repository's manifest lists them: its config.pbtxt
    and the version directory's (its goldens, which a recording rewrites, left out); None without a
    manifest."""
    try:
        listed = read_manifest(root).files
    except (FileNotFoundError, ValueError):
        return None
    prefixes = (f"{model.name}/config.pbtxt", f"{model.name}/{model.version}/")
    return {
        path[len(model.name) + 1 :]: entry.sha256
        for path, entry in listed.items()
        if path.startswith(prefixes) and not Path(path).name.startswith("golden-v")
    }


def files_differ(recorded: dict[str, str] | None, here: dict[str, str] | None) -> list[str] | None:
    """The model's files whose digest differs from those the goldens were recorded from (added and
    removed ones included); None: unknown (goldens recorded before files were, or none here)."""
    if recorded is None or here is None:
        return None
    return sorted(
        path for path in set(recorded) | set(here) if recorded.get(path) != here.get(path)
    )


def _files_note(paths: list[str]) -> str:
    shown = ", ".join(paths[:4]) + (f" and {len(paths) - 4} more" if len(paths) > 4 else "")
    return (
        f"the model's files differ from those the goldens were recorded from ({shown}): another "
        "build of the model (other inputs, or a build step whose output depends on the machine "
        "that ran it)"
    )


def verdict(
    golden: Goldens, chosen: int, differ, here, found: list[Mismatch], files=None
) -> Verdict:
    """Where the goldens came from, and why answers differ from them. files: the digests of the
    model's files as served now (None: unknown)."""
    recorded = golden.classes[chosen].numerics
    notes: list[str] = []
    if len(golden.classes) > 1 and differ == []:
        notes.append(
            f"compared with the goldens of machine class {chosen + 1} of {len(golden.classes)} "
            f"({summary(recorded)})"
        )
    changed = [mismatch for mismatch in found if mismatch.context.startswith("repeat")]
    if not changed:
        return Verdict(summary(recorded), len(golden.classes), notes)
    elements = sum(mismatch.differing for mismatch in changed)
    ulps = [mismatch.max_ulp for mismatch in changed if mismatch.max_ulp is not None]
    size = f"{elements} element(s) differ" + (f" by at most {max(ulps)} ULP" if ulps else "")
    changed_files = files_differ(golden.classes[chosen].files, files)
    if changed_files:
        also = f"; the machine class differs too: {'; '.join(differ)}" if differ else ""
        note = f"{_files_note(changed_files)}{also}; {size}"
        return Verdict(summary(recorded), len(golden.classes), [*notes, note], "model", differ)
    if differ is None:
        cause, numerics_differ = "unknown", None
        where = (
            "the goldens were recorded before fingerprints (recorded where: unknown)"
            if recorded is None
            else "this run's fingerprint is not known here"
        )
        note = (
            f"answers differ from the goldens: {size}; {where}, so a machine difference cannot be "
            "told from a model change: record again on the machine that made them to add one"
        )
    elif differ:
        cause, numerics_differ = "machine-class", differ
        same = " (the same model files as the goldens')" if changed_files == [] else ""
        note = (
            f"recorded on another machine class ({summary(recorded)}): {'; '.join(differ)}; "
            f"{size}{same}. Record this class's goldens beside them ('verify OUT --record'), or "
            "make the model portable (numerics: portable)"
        )
    elif changed_files == []:
        cause, numerics_differ = "unexplained", []
        note = (
            f"the same model files and machine class as the goldens ({summary(recorded)}), yet "
            f"{size}: what decided these bits is not in the fingerprint (a choice made when the "
            "model was compiled or loaded, or answers that vary from run to run); re-recording "
            "would hide it"
        )
    else:
        cause, numerics_differ = "model", []
        note = (
            f"same machine class as the goldens ({summary(recorded)}): the model's answers "
            f"changed; {size}"
        )
    return Verdict(summary(recorded), len(golden.classes), [*notes, note], cause, numerics_differ)


def _same(a: list[dict], b: list[dict]) -> bool:
    return all(
        x.keys() == y.keys() and not mismatches(x, y, sample=0, context="")
        for x, y in zip(a, b, strict=True)
    )


def _own_class(golden: Goldens, numerics) -> tuple[int | None, list[str] | None]:
    """(the class a run of this fingerprint records into and is compared with, or None when it is
    another machine class's run; what differs): the class whose fingerprint matches, or the only
    class where either fingerprint is unknown."""
    chosen, differ = matching_class(golden, numerics)
    own = differ == [] or (differ is None and len(golden.classes) == 1)
    return (chosen if own else None), differ


def _equal_class(golden: Goldens, answers) -> int | None:
    """The first class whose answers equal these, or None."""
    return next((k for k, each in enumerate(golden.classes) if _same(each.outputs, answers)), None)


def compared_on_record(golden: Goldens | None, numerics, answers, files=None) -> Verdict | None:
    """Where the goldens a --record (not refused) compared its answers with came from: the class
    whose fingerprint matches this run's (or the only class where either fingerprint is unknown), as
    merged compares, else a class its answers equal (nothing added); their verdict without notes
    (merged's note says it). None when it compared nothing: no goldens, or a class added beside."""
    if golden is None:
        return None
    chosen, differ = _own_class(golden, numerics)
    if chosen is None and (chosen := _equal_class(golden, answers)) is None:
        return None
    return replace(verdict(golden, chosen, differ, numerics, [], files), notes=[])


REFUSED = "repeat 1 (recorded) vs the committed goldens"  # a refused recording's mismatches


def refused(
    golden: Goldens | None, answers, numerics, files=None
) -> tuple[list[Mismatch], Verdict | None]:
    """A refused recording (its answers differ from the committed ones it would have replaced, of
    the class whose fingerprint matches this run's, else the first): what differs, sample by sample
    as a plain verify lists them, and the verdict on why (another machine class, another build of
    the model, or neither: unexplained) -- what to inspect before 'verify --record --force'."""
    if golden is None:
        return [], None
    chosen, differ = matching_class(golden, numerics)
    found: list[Mismatch] = []
    for k, (was, now) in enumerate(zip(golden.classes[chosen].outputs, answers, strict=True)):
        found += mismatches(was, now, sample=k, context=REFUSED)
    return found, verdict(golden, chosen, differ, numerics, found, files)


def _into_its_class(golden: Goldens, chosen: int, differ, this: GoldenClass):
    """merged for a run of the class chosen (its fingerprint matches, or either is unknown with one
    class): a refusal when the answers differ; equal answers leave the class as recorded (another
    machine of the class, or a rebuild, must not rewrite committed goldens) but goldens from before
    fingerprints take this run's."""
    classes = list(golden.classes)
    if not _same(classes[chosen].outputs, this.outputs):
        where = (
            f"the committed ones of this machine class ({summary(classes[chosen].numerics)})"
            if differ == []
            else "the committed ones (recorded before fingerprints: the machine that made "
            "them is unknown)"
        )
        return (
            golden,
            None,
            f"recorded goldens differ from {where}: not overwritten (outputs changed, or "
            "recorded from another build); inspect, then 'verify OUT --record --force' to "
            "replace them",
        )
    if classes[chosen].numerics is None and this.numerics is not None:
        classes[chosen] = this
    which = f" (machine class {chosen + 1})" if len(classes) > 1 else ""
    return (
        Goldens(golden.inputs, classes),
        f"answers equal the goldens recorded before{which}",
        None,
    )


def merged(golden: Goldens | None, inputs, answers, numerics, force: bool, files=None):
    """The golden set with this run's answers as its machine class: (goldens, a note, a refusal).
    With force, this class alone (the goldens rewritten). Else a class whose fingerprint matches
    keeps its answers (a refusal when they differ); goldens of another class are kept and this
    class added beside them; goldens recorded before fingerprints take this run's fingerprint when
    the answers are the same. files: the digests of the model's files the answers came from."""
    this = GoldenClass(numerics, answers, files)
    if golden is None:  # none yet, or fresh inputs (goldens that no longer fit, --force)
        return Goldens(inputs, [this]), None, None
    if force:  # --record --force rewrites the goldens: this class alone
        dropped = len(golden.classes) - 1
        note = f"the goldens of {dropped} other machine class(es) dropped" if dropped else None
        return Goldens(golden.inputs, [this]), note, None
    classes = list(golden.classes)
    chosen, differ = _own_class(golden, numerics)
    if chosen is not None:
        return _into_its_class(golden, chosen, differ, this)
    if numerics is None:
        return (
            golden,
            None,
            "this run's numerics fingerprint is not known (a server given with --server), and the "
            "goldens hold several machine classes: record on the machine that serves it",
        )
    same_as = _equal_class(golden, answers)
    if same_as is not None:
        return (
            golden,
            f"answers equal the goldens of machine class {same_as + 1}: nothing added",
            None,
        )
    classes.append(this)
    return (
        Goldens(golden.inputs, classes),
        f"added the goldens of machine class {len(classes)} ({summary(numerics)}) beside "
        f"{len(classes) - 1} recorded on other machines",
        None,
    )
