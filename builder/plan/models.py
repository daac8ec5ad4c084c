"""Plan objects: what will be built, from which inputs, under which cache keys."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny

SCHEMA_VERSION = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlannedStep(_Frozen):
    kind: str = Field(description="Step kind, e.g. python.package, onnx.fetch, onnx.export.")
    params: dict = Field(description="Everything besides input files that shapes the output.")
    inputs: dict[str, str] = Field(description="Input files: absolute path → sha256.")
    timeout_s: int | None = Field(
        None, description="How long the step's tool may run (not in the cache key)."
    )
    cache_key: str


class ModelPlan(_Frozen):
    name: str
    version: int
    backend: str
    recipe_path: str = Field(
        description="As given on the command line (relative when under the cwd)."
    )
    recipe_dir: str = Field(
        description="Absolute directory of the recipe; source paths resolve against it."
    )
    recipe_digest: str
    recipe: SerializeAsAny[BaseModel] = Field(
        description="The validated recipe; its class is its kind's "
        "(its backend's recipe_type), e.g. LLMRecipe."
    )
    steps: list[PlannedStep]
    extras: dict = Field(
        default_factory=dict, description="Backend facts for people, e.g. the GPU memory plan."
    )


class Plan(_Frozen):
    schema_version: int = SCHEMA_VERSION
    toolchain: dict[str, str]
    models: list[ModelPlan]
