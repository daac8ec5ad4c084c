"""Read recipe files: YAML → Recipe, every problem named by file:line and key path."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from tritonbuild.core.hashing import sha256_bytes
from tritonbuild.core.paths import PathProblem, inside, read_regular
from tritonbuild.core.yamlio import Located, YamlProblem, load_located
from tritonbuild.errors import MultipleErrors, RecipeError, UsageError
from tritonbuild.recipe.composition import composition_cycles
from tritonbuild.recipe.kinds import Kinds, check, kinds_with_key
from tritonbuild.recipe.models import DTYPE_SPELLINGS, Named
from tritonbuild.recipe.problem import Problem

AnyRecipe = (
    Named  # every recipe type has a name and a version; its backend's module declares the rest
)

RECIPE_SUFFIXES = (".yaml", ".yml")
MAX_RECIPE_BYTES = (
    1 << 20
)  # a recipe is a few kB; the cap keeps /dev/zero-like inputs from filling memory


class LoadedRecipe:
    """A validated recipe plus where it came from (its path and the digest of its bytes)."""

    __slots__ = ("digest", "located", "path", "recipe")

    def __init__(self, recipe: AnyRecipe, path: Path, digest: str, located: Located):
        self.recipe, self.path, self.digest, self.located = recipe, path, digest, located

    def where(self, loc: tuple) -> str:
        """'file:line' of a key path, for errors raised by later stages."""
        line = self.located.line_of(loc)
        return f"{self.path}:{line}" if line else str(self.path)

    @staticmethod
    def key(loc: tuple) -> str:
        """The key path as a user writes it ('source.files[0]'), for messages raised by later stages."""
        return _loc_str(loc)

    @property
    def base_dir(self) -> Path:
        """The recipe's directory, absolute (paths in a plan never depend on the cwd a step runs in)."""
        return self.path.parent.absolute()


def _loc_str(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


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
    """'did you mean 'fp32'? ' for a value outside a Literal's choices (float32, half, TYPE_FP32, fp23), from the
    other spellings of a dtype (DTYPE_SPELLINGS) or the closest choice."""
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
    """'tensorrt' is a key of backend tensorrt's recipes, not python's: the hint for a key another kind accepts."""
    owners = [name for name in kinds_with_key(kinds, loc) if name != backend]
    if not owners:
        return ""
    key = ".".join(str(part) for part in loc)
    return f"'{key}' is a key of backend {' and '.join(owners)} recipes, not {backend}: remove it or change the backend"


def _pydantic_errors(
    e: ValidationError, located: Located, path: Path, kinds: Kinds, backend: str
) -> list[RecipeError]:
    cls = kinds[backend].recipe_type
    out = []
    for err in e.errors():
        loc = tuple(
            part
            for part in err["loc"]
            if not (isinstance(part, str) and part.startswith("function-"))
        )
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
                f"{_loc_str(loc)}: {msg}", where=f"{path}:{line}" if line else str(path), hint=hint
            )
        )
    return out


def _rule_errors(problems: list[Problem], located: Located, path: Path) -> list[RecipeError]:
    return [
        RecipeError(f"{_loc_str(loc)}: {msg}", where=f"{path}:{located.line_of(loc)}", hint=hint)
        for loc, msg, hint in problems
    ]


def _existing_prefix(data, loc: tuple) -> tuple:
    """The longest prefix of loc that names a value in data (an error's loc may go on into a union's member)."""
    found: tuple = ()
    for part in loc:
        if (isinstance(data, dict) and not isinstance(part, int) and part in data) or (
            isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        ):
            found, data = (*found, part), data[part]
        else:
            break
    return found


def _second_pass(
    data: dict, error: ValidationError, kind, kinds: Kinds, rounds: int = 5
) -> list[Problem]:
    """The recipe's rules (its type's and its backend's) on what the schema accepted, so one run reports both
    kinds of error: each refused key is left out (its default applies; a refused list item goes with its list's
    rules) and the rest validated again. A rule on a left-out key or naming one is not reported (it would judge a
    default the user did not write); none are when the recipe still does not validate."""
    import copy

    data, dropped, names = copy.deepcopy(data), [], set()
    for _ in range(rounds):
        for err in error.errors():
            loc = tuple(
                part
                for part in err["loc"]
                if not (isinstance(part, str) and part.startswith("function-"))
            )
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


def _one_or_many(errors: list[RecipeError]) -> RecipeError | MultipleErrors:
    return errors[0] if len(errors) == 1 else MultipleErrors(errors)


INT64 = (-(2**63), 2**63 - 1)


def _nul_strings(data, loc: tuple = ()):
    """Key paths of strings holding a NUL byte (written as "\\0" in YAML): no name, path or parameter can carry
    one (the OS cuts paths there; protobuf text and C strings too)."""
    if isinstance(data, str):
        if "\0" in data:
            yield loc
    elif isinstance(data, dict):
        for k, v in data.items():
            if isinstance(k, str) and "\0" in k:
                yield (*loc, k)
            yield from _nul_strings(v, (*loc, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _nul_strings(v, (*loc, i))


def _out_of_range(data, loc: tuple = ()):
    """Key paths of integers outside int64: no recipe value needs more, and Triton's config and our
    hashing/numpy would fail later with a traceback instead of a line number."""
    if isinstance(data, bool):
        return
    if isinstance(data, int):
        if not INT64[0] <= data <= INT64[1]:
            yield loc
    elif isinstance(data, dict):
        for k, v in data.items():
            yield from _out_of_range(v, (*loc, k))
            if isinstance(k, int) and not isinstance(k, bool) and not INT64[0] <= k <= INT64[1]:
                yield (*loc, k)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _out_of_range(v, (*loc, i))


def load_recipe(path: Path, kinds: Kinds) -> LoadedRecipe:
    """One recipe file, validated as the recipe type of its `backend` among kinds (the registry's recipe_kinds())
    and checked by that type's and that backend's rules."""
    try:
        raw = read_regular(path, MAX_RECIPE_BYTES, "recipe")
    except PathProblem as e:
        raise RecipeError(
            str(e), where=str(path), hint="name a recipe file (YAML, at most 1 MiB)"
        ) from None
    except OSError as e:
        raise RecipeError(
            f"cannot read recipe: {e.strerror}", where=str(path), hint="check the path"
        ) from None
    try:
        located = load_located(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise RecipeError(
            "recipe is not UTF-8 text", where=str(path), hint="save the file as UTF-8"
        ) from None
    except YamlProblem as problem:
        raise RecipeError(
            problem.message,
            where=f"{path}:{problem.line}" if problem.line else str(path),
            hint=problem.hint,
        ) from None
    if not isinstance(located.data, dict):
        raise RecipeError(
            "a recipe must be a YAML mapping (name: ..., backend: ...)",
            where=f"{path}:1",
            hint="`tritonbuild schema` prints the recipe's JSON Schema",
        )
    huge = [
        RecipeError(
            f"{_loc_str(loc)}: integer out of range (the limit is a signed 64-bit integer, "
            f"{INT64[0]}..{INT64[1]})",
            where=f"{path}:{located.line_of(loc)}",
            hint="use a smaller number",
        )
        for loc in _out_of_range(located.data)
    ]
    huge += [
        RecipeError(
            f"{_loc_str(loc)}: a NUL character (\\0) is not allowed in a recipe value",
            where=f"{path}:{located.line_of(loc)}",
            hint="remove it",
        )
        for loc in _nul_strings(located.data)
    ]
    if huge:
        raise _one_or_many(huge)
    backend = located.data.get("backend")
    kind = kinds.get(backend) if isinstance(backend, str) else None
    if kind is None:
        line = located.line_of(("backend",))
        raise RecipeError(
            "backend: required key is missing"
            if backend is None
            else f"backend: unknown backend {backend!r}",
            where=f"{path}:{line}",
            hint=f"use one of {', '.join(kinds)}",
        )
    try:
        recipe = kind.recipe_type.model_validate(located.data)
    except ValidationError as e:
        schema = _pydantic_errors(e, located, path, kinds, backend)
        raise _one_or_many(
            schema + _rule_errors(_second_pass(located.data, e, kind, kinds), located, path)
        ) from None
    problems = _rule_errors(check(recipe, kinds), located, path)
    goldens = getattr(getattr(recipe, "verify", None), "goldens", None)
    if goldens is not None:
        try:
            inside(path.parent, goldens, "verify.goldens")
        except PathProblem as e:
            problems.append(
                RecipeError(
                    str(e),
                    where=f"{path}:{located.line_of(('verify', 'goldens'))}",
                    hint="name a file in the recipe's directory or below it ('verify --record' "
                    "writes there)",
                )
            )
    if problems:
        raise _one_or_many(problems)
    return LoadedRecipe(recipe, path, sha256_bytes(raw), located)


def expand_paths(paths: list[Path]) -> list[Path]:
    """Recipe files named directly, or every *.yaml/*.yml in a named directory (not recursive)."""
    out: list[Path] = []
    for path in paths:
        if "\0" in str(path):
            raise UsageError(f"path {str(path)!r} contains a NUL byte", hint="check the path")
        if path.is_dir():
            # NOTE: entries that are not regular files (a symlink loop, a FIFO) are kept: load_recipe names the
            # problem instead of skipping them silently.
            found = sorted(
                entry
                for entry in path.iterdir()
                if entry.suffix in RECIPE_SUFFIXES and not entry.is_dir()
            )
            if not found:
                raise UsageError(
                    f"no *.yaml recipes in directory {path}",
                    hint="name recipe files or a folder of them",
                )
            out.extend(found)
        elif path.exists() or path.is_symlink():
            out.append(path)
        else:
            raise UsageError(f"no such file or directory: {path}", hint="check the path")
    return out


def load_recipes(paths: list[Path], kinds: Kinds) -> list[LoadedRecipe]:
    """Load every recipe (load_recipe), report all bad ones at once, and refuse duplicate (name, version)."""
    loaded, errors = [], []
    for path in expand_paths(paths):
        try:
            loaded.append(load_recipe(path, kinds))
        except MultipleErrors as e:
            errors.extend(e.errors)
        except RecipeError as e:
            errors.append(e)
    seen: dict = {}
    for loaded_recipe in loaded:
        key = (loaded_recipe.recipe.name, loaded_recipe.recipe.version)
        if key in seen:
            errors.append(
                RecipeError(
                    f"model {key[0]!r} version {key[1]} is also defined in {seen[key].path}",
                    where=f"{loaded_recipe.path}:1",
                    hint="give each recipe a distinct name or version",
                )
            )
        else:
            seen[key] = loaded_recipe
    for cycle in composition_cycles([loaded_recipe.recipe for loaded_recipe in loaded]):
        first = next(
            loaded_recipe for loaded_recipe in loaded if loaded_recipe.recipe.name == cycle[0]
        )
        errors.append(
            RecipeError(
                f"composition cycle: {' → '.join(cycle)}",
                where=first.where(("steps",)),
                hint="a pipeline cannot call itself, directly or through another pipeline",
            )
        )
    if errors:
        raise _one_or_many(errors)
    return loaded
