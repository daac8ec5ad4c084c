"""Stage 2: recipes + toolchain → Plan (steps and cache keys; no heavy work)."""

from tritonbuild.plan.models import ModelPlan, Plan, PlannedStep
from tritonbuild.plan.planner import make_plan

__all__ = ["ModelPlan", "Plan", "PlannedStep", "make_plan"]
