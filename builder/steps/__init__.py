"""Stage 3: Plan → BuildResult. Runs each step in an isolated workdir, through the content-addressed
store."""

from tritonbuild.steps.models import BuildResult, BuiltModel, StepOutcome
from tritonbuild.steps.run import build

__all__ = ["BuildResult", "BuiltModel", "StepOutcome", "build"]
