"""What checking one model's answers gives (verify/answers.py:check_model): the report's answer
fields, typed, and what `verify --record` writes, carried beside them instead of in a side channel
of a dict (issue 44, item 4). The defaults are ModelReport's (a test holds them equal)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from tritonbuild.verify.goldens import Goldens
from tritonbuild.verify.models import Mismatch


@dataclass(frozen=True)
class Recording:
    """What --record writes: this run's answers on the goldens' inputs, joined to the goldens
    already there (None: none yet) as the class of numerics (this run's fingerprint)."""

    inputs: list[dict]
    answers: list[dict]
    golden: Goldens | None
    numerics: dict | None
    files: dict[str, str] | None = None  # the model's files the answers came from


@dataclass(frozen=True)
class AnswersChecked:
    """One model's answers as checked: ModelReport's answer fields, and the recording."""

    passed: bool
    notes: list[str] = field(default_factory=list)
    samples: int = 0
    repeats: int = 0
    compared: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    tolerated: list[Mismatch] = field(default_factory=list)
    batch_invariance: str = "skipped"
    batch_detail: str = ""
    under_load: dict | None = None
    numerics: dict | None = None
    goldens_recorded_on: str | None = None
    goldens_classes: int | None = None
    cause: str | None = None
    numerics_differ: list[str] | None = None
    contract_violations: list[str] | None = None
    goldens_refused: str | None = None
    recording: Recording | None = None

    def report_fields(self) -> dict:
        """The ModelReport fields (every one but the recording)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "recording"}

    def recorded(
        self, note: str | None, refusal: str | None, differing=(), told=None
    ) -> AnswersChecked:
        """After write_goldens: its note added, its refusal failing the check (differing: what the
        refused answers differ in from the committed ones; told: classes.Verdict on why)."""
        why = told.report_fields() if told else {}
        return replace(
            self,
            notes=[*self.notes, *(x for x in (note, refusal) if x), *(told.notes if told else [])],
            passed=self.passed and refusal is None,
            mismatches=[*self.mismatches, *differing],
            **why,
            goldens_refused=refusal,
            recording=None,
        )
