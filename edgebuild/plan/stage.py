"""Stage: one node of the build graph. Frozen and hashable; plain data only."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from edgebuild.core.where import Where


@dataclass(frozen=True)
class Stage:
    id: str  # unique in the plan, human readable: "export-onnx", "compile@host-cpu"
    op: str  # name in the registry
    params_json: str  # canonical JSON of the validated params
    inputs: tuple[tuple[str, str], ...] = ()  # (role, upstream stage id)
    target: str | None = None  # set for target-specific stages
    datasets: tuple[str, ...] = ()  # datasets whose content enters the key
    uses_source: bool = False  # reads the recipe's model source (factory, weights, ONNX)
    measures: bool = False  # a measurement: holds the device lock, never overlaps work
    implicit: bool = False  # added by the planner, not written in the recipe
    custom_ops: bool = False  # reads the recipe's `custom_ops:` (declarations and their files)
    # A shape-fixing stage shared by targets built at this profile (their `shapes:`
    # lists it first); the stage sees it as the inputs' example shapes.
    build_profile: str | None = None
    # Inputs an upstream stage of its chain bound into the graph (`fold-inputs`).
    folded: tuple[str, ...] = ()
    # Where it runs, decided by the planner from the backend's `placement` (measurements:
    # the device); the scheduler sends a DEVICE stage to the target's runner. Not in the
    # key: it follows from the target and its backend, which are.
    runs_on: Where = Where.HOST

    def __post_init__(self) -> None:
        if self.runs_on is Where.DEVICE and self.target is None:
            raise ValueError(f"stage {self.id} runs on a device but has no target")

    def io_declarations(self, recipe: Any) -> dict[str, Any]:
        """The inputs, outputs and shape profiles this stage is told about (a Recipe's
        io_declarations, for its target or its build profile); the declarations of the
        inputs its chain folded into the graph move from `inputs` to `folded`."""
        declared: dict[str, Any] = recipe.io_declarations(self.target, self.build_profile)
        if self.folded:
            inputs = declared["inputs"]
            declared["inputs"] = [t for t in inputs if t["name"] not in self.folded]
            declared["folded"] = [t for t in inputs if t["name"] in self.folded]
        return declared

    @property
    def params(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.params_json)
        return value

    @property
    def upstream(self) -> list[str]:
        return [stage_id for _, stage_id in self.inputs]
