"""Fields added to a serialized record after records were first written: left out while unset, so
records written before them keep their bytes (digests, signatures)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, model_serializer


class OmitWhenNone(BaseModel):
    """A model whose fields named in omit_when_none are left out of its dump while None."""

    omit_when_none: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit_none(self, handler):
        data = handler(self)
        if isinstance(data, dict):
            for key in self.omit_when_none:
                if data.get(key) is None:
                    data.pop(key, None)
        return data
