"""Stage 1: recipe YAML → Recipe."""

from builder.recipe.load import load_recipe, load_recipes
from builder.recipe.models import Recipe

__all__ = ["Recipe", "load_recipe", "load_recipes"]
