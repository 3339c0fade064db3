"""The model a torch stage works on (the recipe's, with an earlier pass's pruning).

Building the recipe's model lives in edgebuild/frontend (the gates build it too) and the
seeded inputs in edgebuild/core/generated.py; both are re-exported here for the passes.
"""

from __future__ import annotations

from typing import Any

from edgebuild.core.generated import sample_inputs as sample_inputs
from edgebuild.frontend.torch_model import build_torch_model as build_torch_model


def load_stage_model(ctx: Any) -> Any:
    """The model a torch stage works on: the recipe's source model, rebuilt by its factory,
    with an earlier pass's pruning (a `pytorch` artifact, e.g. from prune) re-applied.

    An artifact is data (a pruning plan and a weights_only state dict), never a pickled
    module: it may come from a shared store, and reading it must not run code."""
    return load_stage_model_and_steps(ctx)[0]


def load_stage_model_and_steps(ctx: Any) -> tuple[Any, list[Any]]:
    """`load_stage_model`, and the pruning steps already applied (prune appends to them)."""
    from edgebuild.passes.pruned_torch import example_inputs, load_pruned

    model = build_torch_model(ctx.model_source, ctx.recipe_dir)
    if "model" not in ctx.inputs:
        return model, []
    return load_pruned(model, ctx.input().main, example_inputs(ctx.io.inputs))
