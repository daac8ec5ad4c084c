"""JSON Schema of the recipe, generated from the registered kinds' recipe types
(recipes/recipe.schema.json)."""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import Field, TypeAdapter

from tritonbuild.core.hashing import pretty_json
from tritonbuild.recipe.kinds import Kinds, recipe_types


def recipe_schema_bytes(kinds: Kinds) -> bytes:
    """One schema for every registered recipe kind (the registry's recipe_kinds()): a union
    discriminated by 'backend', so editors offer each kind's own keys and no other's."""
    # NOTE: Union[...] (not X | Y): the members are known only at run time
    any_recipe = Annotated[Union[recipe_types(kinds)], Field(discriminator="backend")]  # noqa: UP007
    schema = TypeAdapter(any_recipe).json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://tritonbuild.dev/recipe.schema.json"
    return pretty_json(schema)
