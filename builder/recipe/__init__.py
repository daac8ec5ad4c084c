"""Stage 1: recipe YAML → Recipe."""

from tritonbuild.recipe.load import load_recipe, load_recipes
from tritonbuild.recipe.models import Recipe

__all__ = ["Recipe", "load_recipe", "load_recipes"]
