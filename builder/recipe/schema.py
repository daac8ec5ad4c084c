"""JSON Schema of the recipe, generated from the registered kinds' recipe types (recipes/recipe.schema.json)."""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import Field, TypeAdapter

from tritonbuild.core.hashing import pretty_json
from tritonbuild.recipe.kinds import kinds


def recipe_schema_bytes() -> bytes:
    # NOTE: one schema for every recipe kind; editors pick the branch by 'backend'.
    types = tuple(dict.fromkeys(kind.recipe_type for kind in kinds().values()))
    any_recipe = Annotated[Union[types], Field(discriminator="backend")]  # noqa: UP007 - a union built at run time
    schema = TypeAdapter(any_recipe).json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://tritonbuild.dev/recipe.schema.json"
    return pretty_json(schema)
