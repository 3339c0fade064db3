"""The Python API the CLI calls: load, plan, run. Usable from scripts and notebooks."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from edgebuild.cache.store import CACHE_ENV, Store, default_cache_dir
from edgebuild.plan.planner import Plan, build_plan, select_targets
from edgebuild.plan.resolve import KeyResolver, StageStatus
from edgebuild.recipe.loader import LoadedRecipe, load_recipe
from edgebuild.run.driver import RunOptions, write_reports

if TYPE_CHECKING:
    from edgebuild.report.model import Report

__all__ = ["CACHE_ENV", "Plan", "Report", "RunOptions", "default_cache_dir", "load", "plan",
           "run", "write_reports"]


def load(recipe: Path) -> LoadedRecipe:
    return load_recipe(recipe)


def plan(recipe: Path | LoadedRecipe, cache_dir: Path | None = None,
         targets: list[str] | None = None) -> tuple[Plan, dict[str, StageStatus]]:
    """The build graph and, for each stage, whether it is cached or would run;
    `targets` (globs) limits it to those targets and their upstream stages."""
    loaded = recipe if isinstance(recipe, LoadedRecipe) else load_recipe(recipe)
    built = build_plan(loaded, only=select_targets(loaded, targets) if targets else None)
    store = Store(cache_dir or default_cache_dir())
    resolver = KeyResolver(built, store)
    status = resolver.status()
    if loaded.searches:
        from edgebuild.run.search import refine_status

        status = refine_status(built, resolver, status)
    return built, status


def run(recipe: Path | LoadedRecipe, options: RunOptions | None = None) -> Report:
    """Build every target, evaluate gates, write the reports; returns the Report."""
    from edgebuild.run.driver import run_recipe

    options = options or RunOptions()
    loaded = recipe if isinstance(recipe, LoadedRecipe) else load_recipe(recipe)
    return run_recipe(loaded, options, options.cache_dir or default_cache_dir())
