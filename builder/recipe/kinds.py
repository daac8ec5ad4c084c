"""Recipe kinds: a recipe's `backend` key → the class it validates as and the rules it is checked
by.

A recipe is checked by two sets of rules: its recipe type's generic ones (batching, instances,
warmup, data flow: this package) and its backend's own (`Backend.check_recipe`). This package names
no backend and keeps no list of them: the backend registry (a layer above) hands the loader and the
schema a `Kinds` mapping, each kind's recipe type declared in its backend's own module."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args, get_origin

from pydantic import BaseModel

from tritonbuild.recipe.composition import CompositionRecipe, check_composition_rules
from tritonbuild.recipe.models import Recipe
from tritonbuild.recipe.problem import Problem
from tritonbuild.recipe.rules import check_rules

Rules = Callable[[object], list[Problem]]  # recipe → its backend's problems
# (recipe, its backend's problems) → every problem, the backend's placed among the generic ones
TypeRules = Callable[[object, list[Problem]], list[Problem]]


@dataclass(frozen=True)
class Kind:
    recipe_type: type
    rules: Rules | None = None  # the backend's own rules


Kinds = Mapping[str, Kind]  # recipe `backend` value → its kind, in registration order

_TYPE_RULES: dict[type, TypeRules] = {
    Recipe: check_rules,
    CompositionRecipe: check_composition_rules,
}


def kind_problem(name: str, recipe_type: type) -> str | None:
    """Why recipe_type cannot be the recipe type of kind `name` (None when it can): a recipe type is
    a pydantic model (recipe.models.Recipe or Named and their subclasses) with a name, a version and
    a `backend` field of Literal[name] (the schema's discriminator)."""
    if not (
        isinstance(recipe_type, type)
        and issubclass(recipe_type, BaseModel)
        and {"name", "version", "backend"} <= set(recipe_type.model_fields)
    ):
        return (
            f"recipe type {recipe_type!r} is not a recipe: subclass "
            "tritonbuild.recipe.models.Recipe (or Named) and declare backend: Literal[<name>]"
        )
    field = recipe_type.model_fields.get("backend")
    annotation = field.annotation if field is not None else None
    if get_origin(annotation) is not Literal or get_args(annotation) != (name,):
        return (
            f"{recipe_type.__qualname__}.backend must be Literal[{name!r}] (it is {annotation!r}): "
            "the loader and the JSON Schema pick the recipe type by it"
        )
    return None


def recipe_types(kinds: Kinds) -> tuple[type, ...]:
    """Each kind's recipe type once, in registration order (ensemble and bls may share one)."""
    return tuple(dict.fromkeys(kind.recipe_type for kind in kinds.values()))


def kinds_with_key(kinds: Kinds, loc: tuple) -> list[str]:
    """The kinds whose recipe type accepts the key at loc (e.g. ('tensorrt',), ('source',
    'export')), for the hint on an unknown key."""
    return [name for name, kind in kinds.items() if _has_key(kind.recipe_type, loc)]


def _has_key(model: type, loc: tuple) -> bool:
    for i, key in enumerate(loc):
        field = model.model_fields.get(key) if isinstance(key, str) else None
        if field is None:
            return False
        if i < len(loc) - 1:
            inner = [
                arg
                for arg in _flat_args(field.annotation)
                if isinstance(arg, type) and issubclass(arg, BaseModel)
            ]
            if not inner:
                return False
            model = inner[0]
    return True


def _flat_args(annotation) -> list:
    args = get_args(annotation)
    return [annotation] if not args else [flat for arg in args for flat in _flat_args(arg)]


def check(recipe, kinds: Kinds) -> list[Problem]:
    """Every cross-field rule of a validated recipe: its backend's own rules, placed by its recipe
    type's generic rules (the nearest in the class's MRO) among theirs."""
    kind = kinds[recipe.backend]
    specific = kind.rules(recipe) if kind.rules is not None else []
    type_rules = next(
        (_TYPE_RULES[cls] for cls in type(recipe).__mro__ if cls in _TYPE_RULES), None
    )
    return type_rules(recipe, specific) if type_rules is not None else specific
