"""A pruned PyTorch model as data: its weights and its pruning plan, never a pickled module.

What one stage hands the next may come from a shared store that others can write,
so reading it must not be able to run code (issue 28, docs/security.md). A pruned
model is two files:

    pruned.json   the plan: every structural step torch-pruning took, in order
                  (root module name, out- or in-channels, the removed indices)
    weights.pt    the pruned (and fine-tuned) state dict, read back with
                  torch.load(weights_only=True): tensors, never objects

and the reader rebuilds the module from trusted code only:

    recipe factory (+ weights, + prepost)          the recipe's own Python
      └▶ replay each step through torch-pruning's   the same structural surgery
         dependency graph                           (same groups, same dependents)
           └▶ load_state_dict(strict=True)          every value from weights.pt

A step naming an unknown module or a channel out of range, a plan that is not this
schema, weights that are not a plain state dict or do not fit the rebuilt shapes:
each is a StageError before the model is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from edgebuild.errors import StageError

if TYPE_CHECKING:
    import torch

PLAN_FILE = "pruned.json"
WEIGHTS_FILE = "weights.pt"
PLAN_FORMAT: Final = "edgebuild.pruned-torch"
MAX_PLAN_BYTES = 64 * 1024 * 1024  # a plan lists channel indices: far below this

_TAMPERED_HINT = ("a pruned model travels as a state dict plus a pruning plan and is rebuilt "
                  "from the recipe's factory; anything else (e.g. a pickled module) is refused "
                  "on purpose. If the cache entry was altered, delete it and run again")


class PruneStep(BaseModel):
    """One structural step: the group torch-pruning derives from `module` and these
    root indices (`out_channels`: of its outputs, else of its inputs) is removed."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    module: str = Field(min_length=1, max_length=1000)
    out_channels: bool
    removed: list[Annotated[int, Field(ge=0)]] = Field(min_length=1)


class PruningPlan(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    format: Literal["edgebuild.pruned-torch"] = PLAN_FORMAT
    version: Literal[1] = 1
    steps: list[PruneStep] = Field(default_factory=list)


def example_inputs(tensors: list[dict[str, Any]]) -> tuple[torch.Tensor, ...]:
    """Zeros of the recipe's declared input shapes and dtypes: what torch-pruning traces."""
    import torch

    return tuple(torch.zeros(t["shape"], dtype=getattr(torch, t["dtype"])) for t in tensors)


def dependency_graph(model: Any, example: tuple[Any, ...]) -> Any:
    import torch_pruning as tp

    return tp.DependencyGraph().build_dependency(
        model, example_inputs=example if len(example) > 1 else example[0], verbose=False)


def recorded_steps(graph: Any) -> list[PruneStep]:
    """The steps a torch-pruning dependency graph has taken (its pruning history)."""
    return [PruneStep(module=str(name), out_channels=bool(is_out),
                      removed=[int(i) for i in idxs])
            for name, is_out, idxs in graph.pruning_history()]


def save_pruned(model: Any, steps: list[PruneStep], out: Path) -> str:
    """Write `model` as data into `out`; returns the main file's name."""
    import torch

    torch.save(model.state_dict(), out / WEIGHTS_FILE)
    (out / PLAN_FILE).write_text(PruningPlan(steps=steps).model_dump_json(indent=1) + "\n")
    return PLAN_FILE


def read_plan(main: Path) -> PruningPlan:
    """The plan in `main`, validated, or a StageError naming what is wrong with it."""
    if main.name != PLAN_FILE:
        raise StageError(f"refusing the pruned model {main.name!r}: a pruned model's main "
                         f"file is {PLAN_FILE}", _TAMPERED_HINT)
    try:
        if main.stat().st_size > MAX_PLAN_BYTES:
            raise StageError(f"refusing the pruning plan {main.name}: larger than "
                             f"{MAX_PLAN_BYTES} bytes", _TAMPERED_HINT)
        return PruningPlan.model_validate_json(main.read_bytes())
    except OSError as exc:
        raise StageError(f"cannot read the pruning plan {main.name}: "
                         f"{exc.strerror or type(exc).__name__}", _TAMPERED_HINT) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the file"
        raise StageError(f"refusing the pruning plan {main.name}: {where}: {first['msg']}",
                         _TAMPERED_HINT) from None


def replay(model: Any, steps: list[PruneStep], example: tuple[Any, ...]) -> Any:
    """Apply `steps` to a freshly built `model` in place, through torch-pruning's
    dependency graph (as `DependencyGraph.load_pruning_history` does, with every name
    and index checked first)."""
    if not steps:
        return model
    graph = dependency_graph(model, example)
    for number, step in enumerate(steps, 1):
        where = f"pruning step {number} ({step.module!r})"
        module = dict(model.named_modules()).get(step.module)
        pruner = graph.get_pruner_of_module(module) if module is not None else None
        if module is None or pruner is None or module not in graph.module2node:
            raise StageError(f"refusing the pruning plan: {where} names no prunable module "
                             "of the model the recipe's factory builds", _TAMPERED_HINT)
        if step.out_channels:
            function, channels = pruner.prune_out_channels, graph.get_out_channels(module)
        else:
            function, channels = pruner.prune_in_channels, graph.get_in_channels(module)
        removed = step.removed
        if (channels is None or max(removed) >= channels or len(set(removed)) != len(removed)
                or len(removed) >= channels):
            raise StageError(f"refusing the pruning plan: {where} removes channels "
                             f"{removed[:8]}{'…' if len(removed) > 8 else ''} of a layer with "
                             f"{channels} (out of range, repeated or all of them)",
                             _TAMPERED_HINT)
        try:
            graph.get_pruning_group(module, function, removed).prune(record_history=False)
        except Exception as exc:  # torch-pruning reports a bad group as whatever it hits
            raise StageError(f"cannot replay {where}: {type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:200] if str(exc) else ''}",
                             _TAMPERED_HINT) from None
    return model


def load_weights(model: Any, path: Path) -> Any:
    """Load `path` into `model` with torch.load(weights_only=True) and strict=True."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch reports a bad file as whatever its parser hits
        message = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise StageError(f"refusing the pruned weights {path.name}: not a state dict "
                         f"torch.load(weights_only=True) can read ({type(exc).__name__}: "
                         f"{message})", _TAMPERED_HINT) from None
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
        raise StageError(f"refusing the pruned weights {path.name}: not a state dict "
                         "(names to tensors)", _TAMPERED_HINT)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        detail = "; ".join(line.strip() for line in str(exc).splitlines()[1:3])
        raise StageError(f"the pruned weights {path.name} do not fit the model rebuilt from "
                         f"the factory and the pruning plan: {detail[:300]}",
                         "a `finetune` hook must train the pruned model it is given, not "
                         "change its layers; " + _TAMPERED_HINT) from None
    return model


def load_pruned(model: Any, main: Path, example: tuple[Any, ...]
                ) -> tuple[Any, list[PruneStep]]:
    """The pruned model whose plan is `main`, rebuilt on `model` (freshly built by the
    recipe's factory), and its steps (a further prune appends to them)."""
    plan = read_plan(main)
    replay(model, plan.steps, example)
    load_weights(model, main.with_name(WEIGHTS_FILE))
    return model.eval(), list(plan.steps)
