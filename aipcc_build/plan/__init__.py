"""The plan stage: the selected images as a DAG in dependency order, change detection
(`--changed-since`), and the CI engines' documents (`emit/`)."""

from .dag import BuildPlan, PlannedBuild, build_context, make_plan, outside_parents, project_path

__all__ = ["BuildPlan", "PlannedBuild", "build_context", "make_plan", "outside_parents",
           "project_path"]
