"""Recipe -> DAG of frozen stages."""

from edgebuild.plan.planner import Plan, build_plan
from edgebuild.plan.stage import Stage

__all__ = ["Plan", "Stage", "build_plan"]
