"""What the schema refused, in the user's terms: each pydantic error as a RecipeError named by
file:line and key path, with a hint that names the fix (a close key, another spelling of a dtype,
the backend a key belongs to); and the second pass that still runs the recipe's rules on what the
schema accepted."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from tritonbuild.core.yamlio import Located
from tritonbuild.errors import RecipeError
from tritonbuild.recipe.kinds import Kinds, check, kinds_with_key
from tritonbuild.recipe.models import DTYPE_SPELLINGS
from tritonbuild.recipe.problem import Problem


def key_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _error_loc(err: dict) -> tuple:
    """An error's key path without pydantic's validator steps ('function-after[...]')."""
    return tuple(
        part for part in err["loc"] if not (isinstance(part, str) and part.startswith("function-"))
    )


def _hint_for(err: dict) -> str:
    error_type = err["type"]
    if error_type == "extra_forbidden":
        return "remove this key or check its spelling (`tritonbuild schema` prints every key)"
    if error_type == "missing":
        return "add this key"
    if error_type in ("literal_error", "enum"):
        return "use one of the values listed"
    if error_type.endswith("_type") or error_type.endswith("_parsing"):
        return "change the value's type"
    return "fix the value"


def _models_in(annotation) -> list[type]:
    """The pydantic model classes inside a field's type (through Optional, list, dict, unions)."""
    import typing

    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model_class for arg in typing.get_args(annotation) for model_class in _models_in(arg)]


def _did_you_mean(cls: type | None, loc: tuple) -> str:
    """' Did you mean 'x'?' for an unknown key, from the keys its mapping accepts."""
    import difflib

    if cls is None or not loc or not isinstance(loc[-1], str):
        return ""
    models = [cls]
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        inner = [
            model_class
            for model in models
            if part in model.model_fields
            for model_class in _models_in(model.model_fields[part].annotation)
        ]
        models = (
            inner or models
        )  # not a field: a key of a dict of models (e.g. export.inputs.<name>)
    keys = {field.alias or name for model in models for name, field in model.model_fields.items()}
    close = difflib.get_close_matches(loc[-1], sorted(keys), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


def _value_suggestion(err: dict) -> str:
    """'did you mean 'fp32'? ' for a value outside a Literal's choices (float32, half, TYPE_FP32,
    fp23), from the other spellings of a dtype (DTYPE_SPELLINGS) or the closest choice."""
    import difflib
    import re

    value = err.get("input")
    choices = re.findall(r"'([^']*)'", str(err.get("ctx", {}).get("expected", "")))
    if not isinstance(value, str) or not choices:
        return ""
    plain = value.strip().lower()
    for prefix in ("type_", "torch.", "numpy.", "np."):
        plain = plain.removeprefix(prefix)
    meant = DTYPE_SPELLINGS.get(plain) if "fp32" in choices else None
    if meant is None:
        close = difflib.get_close_matches(plain, choices, n=1, cutoff=0.6)
        meant = close[0] if close else None
    return (
        f"did you mean {' or '.join(map(repr, meant.split(' or ')))}? "
        if meant and meant != value
        else ""
    )


def _other_kinds_key(kinds: Kinds, backend: str, loc: tuple) -> str:
    """'tensorrt' is a key of backend tensorrt's recipes, not python's: the hint for a key another
    kind accepts."""
    owners = [name for name in kinds_with_key(kinds, loc) if name != backend]
    if not owners:
        return ""
    key = ".".join(str(part) for part in loc)
    return f"'{key}' is a key of backend {' and '.join(owners)} recipes, not {backend}: remove it or change the backend"


def schema_errors(
    e: ValidationError, located: Located, path: Path, kinds: Kinds, backend: str
) -> list[RecipeError]:
    cls = kinds[backend].recipe_type
    out = []
    for err in e.errors():
        loc = _error_loc(err)
        line = located.line_of(loc)
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif (
            "input" in err
            and err["type"] not in ("missing",)
            and not isinstance(err["input"], dict)
        ):
            msg = f"{msg} (got {err['input']!r})"
        hint = _hint_for(err)
        if err["type"] == "extra_forbidden":
            hint = _other_kinds_key(kinds, backend, loc) or _did_you_mean(cls, loc) + hint
        elif err["type"] == "literal_error":
            hint = _value_suggestion(err) + hint
        out.append(
            RecipeError(
                f"{key_path(loc)}: {msg}", where=f"{path}:{line}" if line else str(path), hint=hint
            )
        )
    return out


def _existing_prefix(data, loc: tuple) -> tuple:
    """The longest prefix of loc that names a value in data (an error's loc may go on into a union's
    member)."""
    found: tuple = ()
    for part in loc:
        if (isinstance(data, dict) and not isinstance(part, int) and part in data) or (
            isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        ):
            found, data = (*found, part), data[part]
        else:
            break
    return found


def second_pass(
    data: dict, error: ValidationError, kind, kinds: Kinds, rounds: int = 5
) -> list[Problem]:
    """The recipe's rules (its type's and its backend's) on what the schema accepted, so one run
    reports both kinds of error: each refused key is left out (its default applies; a refused list
    item goes with its list's rules) and the rest validated again. A rule on a left-out key or
    naming one is not reported (it would judge a default the user did not write); none are when the
    recipe still does not validate."""
    import copy

    data, dropped, names = copy.deepcopy(data), [], set()
    for _ in range(rounds):
        for err in error.errors():
            loc = _error_loc(err)
            cut = _existing_prefix(data, loc[:-1] if err["type"] == "missing" else loc)
            if not cut:
                return []  # a top-level key is missing, or a whole-recipe rule failed: nothing sound to check
            if isinstance(cut[-1], int):
                cut = cut[:-1]  # the list's items shift: its rules would name the wrong index
            parent = data
            for part in cut[:-1]:
                parent = parent[part]
            if err["type"] != "extra_forbidden":  # an unknown key changes nothing a rule reads
                names.update(part for part in cut if isinstance(part, str))
            parent.pop(cut[-1], None)
            dropped.append(cut)
        try:
            recipe = kind.recipe_type.model_validate(data)
        except ValidationError as again:
            error = again
            continue
        return [
            (loc, msg, hint)
            for loc, msg, hint in check(recipe, kinds)
            if not any(loc[: len(cut)] == cut or cut[: len(loc)] == loc for cut in dropped)
            and not any(name in f"{msg} {hint}" for name in names)
        ]
    return []
