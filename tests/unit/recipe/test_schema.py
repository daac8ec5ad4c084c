from tests.conftest import ROOT
from tritonbuild.recipe.schema import recipe_schema_bytes


def test_committed_schema_is_current():
    committed = (ROOT / "recipes" / "recipe.schema.json").read_bytes()
    assert committed == recipe_schema_bytes(), "recipes/recipe.schema.json is stale: run " \
        "'tritonbuild schema > recipes/recipe.schema.json'"
