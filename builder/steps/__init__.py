"""Stage 3: Plan → BuildResult. Runs each step in an isolated workdir, through the content-addressed store."""

from builder.steps.models import BuildResult, BuiltModel, StepOutcome
from builder.steps.run import build

__all__ = ["BuildResult", "BuiltModel", "StepOutcome", "build"]
