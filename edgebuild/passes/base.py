"""What every stage operation (a pass, a compile, a measurement) looks like.

An op is a class with a name, a version that is bumped whenever its output
changes, a statically declared pydantic `Params` class, the formats it takes
and makes, and the distributions whose versions go into its cache key. Its
`run` executes inside a worker process and writes files into `ctx.out`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from edgebuild.cache.store import Artifact

if TYPE_CHECKING:
    from edgebuild.data.loaders import Samples


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class TargetInfo:
    """The resolved target a target-specific stage builds for (plain data)."""

    name: str
    profile: dict[str, Any]  # TargetProfile, with the recipe's overrides applied

    @property
    def backend(self) -> str:
        return str(self.profile["backend"])

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.profile.get("options", {}))


@dataclass
class StageContext:
    """Everything a stage may read, handed to `Op.run` in the worker process."""

    stage_id: str
    inputs: dict[str, Artifact]
    out: Path
    recipe: dict[str, Any]  # inputs, outputs, model, datasets: the recipe as plain data
    recipe_dir: Path
    target: TargetInfo | None = None
    log_lines: list[str] = field(default_factory=list)

    def input(self, role: str = "model") -> Artifact:
        return self.inputs[role]

    def dataset(self, name: str) -> Samples:
        """Load a recipe dataset, checked against the model's declared inputs."""
        from pydantic import TypeAdapter

        from edgebuild.data.loaders import check_matches_inputs, load_dataset
        from edgebuild.recipe.datasets import DatasetSpec

        spec: DatasetSpec = TypeAdapter(DatasetSpec).validate_python(self.recipe["datasets"][name])
        samples = load_dataset(spec, self.recipe_dir, [t["name"] for t in self.recipe["inputs"]],
                               name)
        check_matches_inputs(samples, self.recipe["inputs"], name)
        return samples


@dataclass
class OpResult:
    """What `run` returns: the main file's name, its format, and metadata to report."""

    main: str
    format: str
    metadata: dict[str, Any] = field(default_factory=dict)
    unmeasurable: str = ""  # non-empty: nothing was measured, and this is why


class Op(ABC):
    name: ClassVar[str]
    version: ClassVar[int] = 1
    Params: ClassVar[type[BaseModel]] = NoParams
    accepts: ClassVar[tuple[str, ...]] = ("onnx",)
    produces: ClassVar[str] = "onnx"
    tools: ClassVar[tuple[str, ...]] = ()
    target_specific: ClassVar[bool] = False
    summary: ClassVar[str] = ""
    # Params fields that name recipe datasets: their content enters the stage key.
    dataset_fields: ClassVar[tuple[str, ...]] = ()

    def tool_names(self, target: TargetInfo | None) -> tuple[str, ...]:
        """Distributions whose installed versions belong in this stage's key."""
        return self.tools

    @abstractmethod
    def run(self, ctx: StageContext, params: Any) -> OpResult:
        """Do the work; write every output file under `ctx.out`."""
