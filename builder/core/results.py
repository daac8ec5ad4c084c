"""Typed results of the api functions: dataclasses whose to_dict() is the JSON the CLI prints with
--json (keys are the fields; a field with OMIT_NONE metadata is left out while it is None, as the
dicts it replaces left the key out when it did not apply)."""

from __future__ import annotations

from dataclasses import fields

# field(default=None, metadata=OMIT_NONE): a field whose key the JSON form has only when it is set
OMIT_NONE = {"omit_none": True}


class Result:
    """Mixed into an api result dataclass: to_dict() for the JSON form, nested results included."""

    def to_dict(self) -> dict:
        return {
            each.name: plain(getattr(self, each.name))
            for each in fields(self)
            if not (each.metadata.get("omit_none") and getattr(self, each.name) is None)
        }


def plain(value):
    """value with every Result in it (also inside lists and dicts) turned into its dict."""
    if isinstance(value, Result):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value
