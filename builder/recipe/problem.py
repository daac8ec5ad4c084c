"""A recipe rule that does not hold, as every recipe rule and every backend's check_recipe returns
it: (key path, message, hint). The loader turns each into a RecipeError naming the file and line of
the key."""

from __future__ import annotations

Problem = tuple[tuple, str, str]
