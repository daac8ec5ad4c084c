"""JSON Schema of the recipe, generated from the pydantic models (recipes/recipe.schema.json)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, TypeAdapter

from tritonbuild.core.hashing import pretty_json
from tritonbuild.recipe.composition import CompositionRecipe
from tritonbuild.recipe.llm import LLMRecipe, VLLMRecipe
from tritonbuild.recipe.models import Recipe


def recipe_schema_bytes() -> bytes:
    # NOTE: one schema for every recipe kind; editors pick the branch by 'backend'.
    any_recipe = Annotated[Recipe | LLMRecipe | VLLMRecipe | CompositionRecipe, Field(discriminator="backend")]
    schema = TypeAdapter(any_recipe).json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://tritonbuild.dev/recipe.schema.json"
    return pretty_json(schema)
