"""Read recipe files: YAML → Recipe, every problem named by file:line and key path."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from tritonbuild.core.hashing import sha256_bytes
from tritonbuild.core.paths import PathProblem, inside, read_regular
from tritonbuild.core.yamlio import Located, YamlProblem, load_located
from tritonbuild.errors import MultipleErrors, RecipeError, UsageError
from tritonbuild.recipe.composition import composition_cycles
from tritonbuild.recipe.kinds import Kind, Kinds, check
from tritonbuild.recipe.models import Named
from tritonbuild.recipe.problem import Problem
from tritonbuild.recipe.schema_errors import key_path, schema_errors, second_pass

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
        """The key path as a user writes it ('source.files[0]'), for messages raised by later
        stages."""
        return key_path(loc)

    @property
    def base_dir(self) -> Path:
        """The recipe's directory, absolute (paths in a plan never depend on the cwd a step runs
        in)."""
        return self.path.parent.absolute()


def _rule_errors(problems: list[Problem], located: Located, path: Path) -> list[RecipeError]:
    return [
        RecipeError(f"{key_path(loc)}: {msg}", where=f"{path}:{located.line_of(loc)}", hint=hint)
        for loc, msg, hint in problems
    ]


def _one_or_many(errors: list[RecipeError]) -> RecipeError | MultipleErrors:
    return errors[0] if len(errors) == 1 else MultipleErrors(errors)


INT64 = (-(2**63), 2**63 - 1)


def _nul_strings(data, loc: tuple = ()):
    """Key paths of strings holding a NUL byte (written as "\\0" in YAML): no name, path or
    parameter can carry one (the OS cuts paths there; protobuf text and C strings too)."""
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
    """One recipe file, validated as the recipe type of its `backend` among kinds (the registry's
    recipe_kinds()) and checked by that type's and that backend's rules."""
    raw, located = _read(path)
    values = _value_errors(located, path)
    if values:
        raise _one_or_many(values)
    backend = located.data.get("backend")
    kind = _kind_of(backend, located, path, kinds)
    try:
        recipe = kind.recipe_type.model_validate(located.data)
    except ValidationError as e:
        schema = schema_errors(e, located, path, kinds, backend)
        raise _one_or_many(
            schema + _rule_errors(second_pass(located.data, e, kind, kinds), located, path)
        ) from None
    problems = _rule_errors(check(recipe, kinds), located, path) + _goldens_outside(
        recipe, located, path
    )
    if problems:
        raise _one_or_many(problems)
    return LoadedRecipe(recipe, path, sha256_bytes(raw), located)


def _read(path: Path) -> tuple[bytes, Located]:
    """The file's bytes and its YAML with the line of each key; a RecipeError for a file that is not
    a readable recipe (too large, not a regular file, not UTF-8, not YAML, not a mapping)."""
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
    return raw, located


def _value_errors(located: Located, path: Path) -> list[RecipeError]:
    """Values no recipe key can hold, whatever its kind: integers beyond int64, strings with a
    NUL."""
    huge = [
        RecipeError(
            f"{key_path(loc)}: integer out of range (the limit is a signed 64-bit integer, "
            f"{INT64[0]}..{INT64[1]})",
            where=f"{path}:{located.line_of(loc)}",
            hint="use a smaller number",
        )
        for loc in _out_of_range(located.data)
    ]
    return huge + [
        RecipeError(
            f"{key_path(loc)}: a NUL character (\\0) is not allowed in a recipe value",
            where=f"{path}:{located.line_of(loc)}",
            hint="remove it",
        )
        for loc in _nul_strings(located.data)
    ]


def _kind_of(backend, located: Located, path: Path, kinds: Kinds) -> Kind:
    """The recipe kind its `backend` key names, or a RecipeError naming the known ones."""
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
    return kind


def _goldens_outside(recipe, located: Located, path: Path) -> list[RecipeError]:
    """verify.goldens naming a file outside the recipe's directory."""
    goldens = getattr(getattr(recipe, "verify", None), "goldens", None)
    if goldens is None:
        return []
    try:
        inside(path.parent, goldens, "verify.goldens")
    except PathProblem as e:
        return [
            RecipeError(
                str(e),
                where=f"{path}:{located.line_of(('verify', 'goldens'))}",
                hint="name a file in the recipe's directory or below it ('verify --record' "
                "writes there)",
            )
        ]
    return []


def expand_paths(paths: list[Path]) -> list[Path]:
    """Recipe files named directly, or every *.yaml/*.yml in a named directory (not recursive)."""
    out: list[Path] = []
    for path in paths:
        if "\0" in str(path):
            raise UsageError(f"path {str(path)!r} contains a NUL byte", hint="check the path")
        if path.is_dir():
            # NOTE: entries that are not regular files (a symlink loop, a FIFO) are kept:
            # load_recipe names the problem instead of skipping them silently.
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
    """Load every recipe (load_recipe), report all bad ones at once, and refuse duplicate (name,
    version)."""
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
