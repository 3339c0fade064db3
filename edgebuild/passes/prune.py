"""prune: structured filter pruning in PyTorch, before export.

Whole output channels (filters) with the smallest L1 (or L2) norm are removed,
together with everything that depends on them — the next layer's input
channels, BatchNorm entries, residual partners — using torch-pruning's
dependency graph. The network physically shrinks, so the exported ONNX is
smaller and faster, not just masked with zeros. An optional fine-tuning
callable recovers accuracy; the gates (against the *unpruned* FP32 reference)
show what pruning cost.

The output is a `pytorch` artifact made of data only (passes/pruned_torch.py):
the pruned state dict and the pruning plan — every step torch-pruning took, with
the removed channel indices. The next stage rebuilds the module from the recipe's
factory and replays the plan; no module is ever pickled, because a cache entry
may come from a shared store and reading it must not run code.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.errors import StageError
from edgebuild.passes.pruned_torch import (
    example_inputs,
    load_pruned,
    recorded_steps,
    save_pruned,
)
from edgebuild.passes.torch_model import build_torch_model, load_stage_model_and_steps


class PruneParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ratio: float = Field(gt=0, lt=1, description="Fraction of channels removed per layer.")
    importance: Literal["l1", "l2"] = Field("l1", description="Filter norm used for ranking.")
    round_to: int | None = Field(
        None, ge=1, description="Keep channel counts multiples of this (e.g. 8 for SIMD).")
    ignore: list[str] = Field(
        default_factory=list,
        description="Module names never pruned; the classifier (the layer producing the "
        "model output) is always kept whole.")
    finetune: str | None = Field(
        None, description="`module:fn` or `file.py:fn` called as fn(model, **finetune_kwargs) "
        "-> model, to recover accuracy after pruning.")
    finetune_kwargs: dict[str, Any] = Field(default_factory=dict)


class Prune(Op):
    name = "prune"
    # 2: the finetune function's file is in the key
    # 3: the output is data (state dict + pruning plan), not a pickled module
    version = 3
    Params = PruneParams
    accepts = ("pytorch",)
    produces = "pytorch"
    tools: ClassVar[tuple[str, ...]] = ("torch", "torch-pruning")
    summary = "structured L1/L2 filter pruning that removes channels (PyTorch)"
    reads_source = True  # the model is rebuilt by the recipe's factory
    callable_params = ("finetune",)

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        import torch
        import torch_pruning as tp

        from edgebuild.recipe.files import load_callable

        p: PruneParams = params
        model, earlier = load_stage_model_and_steps(ctx)
        example = example_inputs(ctx.io.inputs)
        before = sum(x.numel() for x in model.parameters())
        modules = dict(model.named_modules())
        unknown = [n for n in p.ignore if n not in modules]
        if unknown:
            raise StageError(f"prune.ignore names unknown modules {unknown}",
                             f"module names look like: {list(modules)[1:6]}")
        ignored = [modules[n] for n in p.ignore] + _output_layers(model, example)
        pruner = tp.pruner.MetaPruner(
            model, example if len(example) > 1 else example[0],
            importance=tp.importance.MagnitudeImportance(p=1 if p.importance == "l1" else 2),
            pruning_ratio=p.ratio, ignored_layers=ignored, round_to=p.round_to)
        pruner.step()
        steps = earlier + recorded_steps(pruner.DG)
        pruned = sum(x.numel() for x in model.parameters())
        metadata: dict[str, Any] = {"parameters_before": before, "parameters_after": pruned,
                                    "removed": round(1 - pruned / before, 4)}
        if p.finetune is not None:
            hook = load_callable(p.finetune, ctx.recipe_dir)
            if not callable(hook):
                raise StageError(f"prune.finetune '{p.finetune}' is not callable")
            model = hook(model, **p.finetune_kwargs)
            if not isinstance(model, torch.nn.Module):
                raise StageError(f"prune.finetune '{p.finetune}' must return the model")
            metadata["finetune"] = p.finetune
        main = save_pruned(model.eval(), steps, ctx.out)
        # What the next stage will do, done now: a hook that changed the layers fails here.
        load_pruned(build_torch_model(ctx.model_source, ctx.recipe_dir), ctx.out / main, example)
        return OpResult(main=main, format="pytorch", metadata=metadata)


def _output_layers(model: Any, example: tuple[Any, ...]) -> list[Any]:
    """Linear/Conv layers whose output is the model output: pruning them changes the task."""
    import torch

    last: list[Any] = []

    def remember(module: Any, _inputs: Any, _output: Any) -> None:
        last.append(module)

    hooks = [m.register_forward_hook(remember) for m in model.modules()
             if isinstance(m, torch.nn.Linear | torch.nn.Conv2d)]
    with torch.no_grad():
        model(*example)
    for hook in hooks:
        hook.remove()
    return last[-1:]
