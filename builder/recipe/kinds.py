"""Recipe kinds: a recipe's `backend` key → the class it validates as and the rules it is checked by.

A recipe is checked by two sets of rules: its recipe type's generic ones (batching, instances, warmup, data
flow: this package) and its backend's own (`Backend.check_recipe`). This package names no backend: the
built-in kinds' types are read off the recipe classes' `backend` literals, and every backend, built-in or
plug-in, brings its rules and the recipe keys it owns through `register_kind`, called by the backend registry
(a layer above, which hooks itself in with `add_loader`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import get_args

from tritonbuild.recipe.composition import CompositionRecipe, check_composition_rules
from tritonbuild.recipe.models import Recipe, check_rules

Problem = tuple[tuple, str, str]  # (key path, message, hint)
Rules = Callable[[object], list[Problem]]  # recipe → its backend's problems
# (recipe, its backend's problems) → every problem, the backend's placed among the generic ones
TypeRules = Callable[[object, list[Problem]], list[Problem]]


@dataclass(frozen=True)
class Kind:
    recipe_type: type
    rules: Rules | None = None  # the backend's own rules (None until its backend is registered)
    owned_keys: tuple[str, ...] = ()  # recipe keys only this kind reads: an error on any other kind's recipe


_TYPE_RULES: dict[type, TypeRules] = {Recipe: check_rules, CompositionRecipe: check_composition_rules}
_BUILTIN_TYPES = (Recipe, CompositionRecipe)
_KINDS: dict[str, Kind] = {
    name: Kind(cls) for cls in _BUILTIN_TYPES for name in get_args(cls.model_fields["backend"].annotation)}
_BUILTIN_NAMES = frozenset(_KINDS)
_LOADERS: list[Callable[[], None]] = []


def add_loader(load: Callable[[], None]) -> None:
    """Call `load` before kinds are read (the backend registry registers the built-in backends there)."""
    if load not in _LOADERS:
        _LOADERS.append(load)


def kinds() -> dict[str, Kind]:
    for load in list(_LOADERS):
        load()
    return dict(_KINDS)


def register_kind(name: str, recipe_type: type, rules: Rules | None = None, owned_keys: tuple[str, ...] = ()) -> bool:
    """Make `backend: name` load as recipe_type, checked by rules; True when the kind is new (not a built-in
    recipe type's), so that unregister_kind may remove it again."""
    known = _KINDS.get(name)
    if known is not None and known.recipe_type is not recipe_type:
        raise ValueError(f"recipe kind {name!r} is already {known.recipe_type.__qualname__}, not "
                         f"{recipe_type.__qualname__}")
    for other, kind in _KINDS.items():
        shared = sorted(set(owned_keys) & set(kind.owned_keys))
        if other != name and shared:
            raise ValueError(f"recipe kind {name!r}: keys {shared} are already owned by {other!r}")
    _KINDS[name] = Kind(recipe_type, rules, tuple(owned_keys))
    return known is None


def unregister_kind(name: str) -> None:
    if name not in _BUILTIN_NAMES:
        _KINDS.pop(name, None)


def _foreign_keys(recipe, known: dict[str, Kind]) -> list[Problem]:
    """Keys set on this recipe that another kind owns (e.g. 'tensorrt' options on a python recipe), in the
    order of the recipe type's fields."""
    fields = list(type(recipe).model_fields)
    owned = sorted(((key, owner) for owner, kind in known.items() if owner != recipe.backend
                    for key in kind.owned_keys if key in fields), key=lambda item: fields.index(item[0]))
    return [((key,), f"'{key}' options apply to backend {owner}, not {recipe.backend}",
             "remove them or change the backend") for key, owner in owned if getattr(recipe, key) is not None]


def check(recipe) -> list[Problem]:
    """Every cross-field rule of a validated recipe: keys another kind owns, then its backend's own rules,
    placed by its recipe type's generic rules (the nearest in the class's MRO) among theirs."""
    known = kinds()
    kind = known[recipe.backend]
    specific = _foreign_keys(recipe, known) + (kind.rules(recipe) if kind.rules is not None else [])
    type_rules = next((_TYPE_RULES[cls] for cls in type(recipe).__mro__ if cls in _TYPE_RULES), None)
    return type_rules(recipe, specific) if type_rules is not None else specific
