"""JSON Schema of the recipe, generated from the pydantic models (recipes/recipe.schema.json)."""

from __future__ import annotations

from builder.core.hashing import pretty_json
from builder.recipe.models import Recipe


def recipe_schema_bytes() -> bytes:
    schema = Recipe.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://tritonbuild.dev/recipe.schema.json"
    return pretty_json(schema)
