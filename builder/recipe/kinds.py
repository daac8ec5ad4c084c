"""Recipe kinds: a recipe's `backend` key → the class it validates as and the cross-field rules it has.

The built-in kinds are read off the recipe classes' `backend` literals (no second table to keep in step);
the backend registry, a layer above, adds the kind of every plug-in backend with `register_kind`."""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

from tritonbuild.recipe.composition import CompositionRecipe, check_composition_rules
from tritonbuild.recipe.llm import LLMRecipe, VLLMRecipe, check_llm_rules
from tritonbuild.recipe.models import Recipe, check_rules

Rules = Callable[[object], list[tuple]]  # recipe → [(key path, message, hint)]

_BUILTIN: dict[type, Rules | None] = {Recipe: check_rules, LLMRecipe: check_llm_rules, VLLMRecipe: None,
                                      CompositionRecipe: check_composition_rules}
_KINDS: dict[str, tuple[type, Rules | None]] = {
    name: (cls, rules) for cls, rules in _BUILTIN.items() for name in get_args(cls.model_fields["backend"].annotation)}


def kinds() -> dict[str, tuple[type, Rules | None]]:
    return dict(_KINDS)


def register_kind(name: str, recipe_type: type, rules: Rules | None = None) -> bool:
    """Make `backend: name` load as recipe_type; False when it already does (a built-in kind)."""
    known = _KINDS.get(name)
    if known is not None:
        if known[0] is not recipe_type:
            raise ValueError(f"recipe kind {name!r} is already {known[0].__qualname__}, not "
                             f"{recipe_type.__qualname__}")
        return False
    _KINDS[name] = (recipe_type, rules)
    return True


def unregister_kind(name: str) -> None:
    _KINDS.pop(name, None)
