"""Goldens per machine class: which class's answers a run is compared with (the one whose numerics
fingerprint matches the run's), why answers differ from them (another machine class, or the model
changed), and how a recording joins the classes already recorded."""

from __future__ import annotations

from dataclasses import dataclass, field

from tritonbuild.core.numerics import differences, summary
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


def verdict(golden: Goldens, chosen: int, differ, here, found: list[Mismatch]) -> Verdict:
    """Where the goldens came from, and why answers differ from them."""
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
        note = (
            f"recorded on another machine class ({summary(recorded)}): {'; '.join(differ)}; "
            f"{size}. Record this class's goldens beside them ('verify OUT --record'), or make "
            "the model portable (numerics: portable)"
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


def merged(golden: Goldens | None, inputs, answers, numerics, force: bool):
    """The golden set with this run's answers as its machine class: (goldens, a note, a refusal).
    With force, this class alone (the goldens rewritten). Else a class whose fingerprint matches
    keeps its answers (a refusal when they differ); goldens of another class are kept and this
    class added beside them; goldens recorded before fingerprints take this run's fingerprint when
    the answers are the same."""
    this = GoldenClass(numerics, answers)
    if golden is None:  # none yet, or fresh inputs (goldens that no longer fit, --force)
        return Goldens(inputs, [this]), None, None
    if force:  # --record --force rewrites the goldens: this class alone
        dropped = len(golden.classes) - 1
        note = f"the goldens of {dropped} other machine class(es) dropped" if dropped else None
        return Goldens(golden.inputs, [this]), note, None
    classes = list(golden.classes)
    chosen, differ = matching_class(golden, numerics)
    if differ == [] or (differ is None and len(classes) == 1):
        if not _same(classes[chosen].outputs, answers) and not force:
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
        classes[chosen] = (
            this if numerics is not None else classes[chosen]._replace(outputs=answers)
        )
        return Goldens(golden.inputs, classes), None, None
    if numerics is None:
        return (
            golden,
            None,
            "this run's numerics fingerprint is not known (a server given with --server), and the "
            "goldens hold several machine classes: record on the machine that serves it",
        )
    same_as = next((k for k, each in enumerate(classes) if _same(each.outputs, answers)), None)
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
