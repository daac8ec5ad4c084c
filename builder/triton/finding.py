"""One Triton load rule checked on one model: the row that assemble refuses on and verify's report
carries."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Finding(BaseModel):
    """model: the model directory's name ("*" for the repository); check: the rule's name; detail:
    Triton's words for what failed (the problems joined by "; "), or what holds when ok."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    check: str
    ok: bool
    detail: str
