"""What the build produced: per model, the version directory's files (by digest) and the derived
I/O."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tritonbuild.core.cas import FileEntry
from tritonbuild.plan.models import ModelPlan
from tritonbuild.recipe.models import TensorSpec

SCHEMA_VERSION = 1
__all__ = ["BuildResult", "BuiltModel", "FileEntry", "StepOutcome"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StepOutcome(_Frozen):
    kind: str
    cache_key: str
    status: Literal["built", "cached", "prebuilt", "skipped"]
    reason: str
    seconds: float


class BuiltModel(_Frozen):
    plan: ModelPlan
    files: dict[str, FileEntry] = Field(
        description="Version-directory relative path → blob in the store."
    )
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    steps: list[StepOutcome]


class BuildResult(_Frozen):
    schema_version: int = SCHEMA_VERSION
    store: str = Field(description="Root of the content-addressed store holding every file's blob.")
    toolchain: dict[str, str]
    models: list[BuiltModel]
    warnings: list[str] = Field(
        default_factory=list, description="Degradations the user should know about."
    )
