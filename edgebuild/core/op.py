"""What every stage operation (a pass, a compile, a measurement) looks like.

An op is a class with a name, a version that is bumped whenever its output
changes, a statically declared pydantic `Params` class, the formats it takes
and makes, and the distributions whose versions go into its cache key. Its
`run` executes inside a worker process and writes files into `ctx.out`.

A stage sees only what it declared: its upstream artifacts, the datasets its
params name (`DatasetRef` fields, found at any depth), the model source if it
reads it, and the recipe's input/output declarations. Everything it can see is
in its key, so asking for anything else is an error, not a stale cache entry.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from edgebuild.core.artifact import Artifact
from edgebuild.core.datasets import dataset_names
from edgebuild.core.samples import Samples
from edgebuild.core.target import Target
from edgebuild.errors import StageError


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class IoSpec:
    """The recipe's declared model inputs (name, shape, dtype, dynamic_axes), outputs and
    shape profiles (`shapes:`, resolved by edgebuild.core.shapes.io_profiles).

    `folded`: the declarations of the inputs an upstream stage bound into the graph as
    constants (`fold-inputs`, each with its `value`); they are no longer in `inputs`, so
    nothing feeds them. `state`: the recipe's `state:` pairs (input, output, initial
    value): a step's output that is the next step's input (edgebuild/data/stream.py)."""

    inputs: list[dict[str, Any]]
    outputs: list[str]
    shapes: dict[str, dict[str, int]] = field(default_factory=dict)
    folded: list[dict[str, Any]] = field(default_factory=list)
    state: list[dict[str, Any]] = field(default_factory=list)


_UNDECLARED_HINT = ("a params field that names a recipe dataset must be typed DatasetRef "
                    "(edgebuild.core.datasets), so the planner declares it and keys the stage "
                    "on its content (docs/extending.md)")


@dataclass
class StageContext:
    """Everything a stage may read, handed to `Op.run` in the worker process."""

    stage_id: str
    out: Path
    io: IoSpec
    recipe_dir: Path  # resolves files the declared inputs name (a factory module, a hook)
    target: Target | None = None
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    datasets: Mapping[str, Callable[[], Samples]] = field(default_factory=dict)
    source: dict[str, Any] | None = None  # the recipe's `model:`, if the stage reads it
    _loaded: dict[str, Samples] = field(default_factory=dict)

    @property
    def inputs(self) -> Mapping[str, Artifact]:
        """The upstream artifacts by role (read-only)."""
        return MappingProxyType(self.artifacts)

    def input(self, role: str = "model") -> Artifact:
        if role not in self.artifacts:
            raise StageError(f"stage '{self.stage_id}' has no input '{role}' "
                             f"(its inputs: {sorted(self.artifacts) or 'none'})")
        return self.artifacts[role]

    def dataset(self, name: str) -> Samples:
        """A recipe dataset this stage declared, loaded and checked against the inputs."""
        if name not in self.datasets:
            raise StageError(f"stage '{self.stage_id}' reads dataset '{name}', which it did "
                             f"not declare (declared: {sorted(self.datasets) or 'none'})",
                             _UNDECLARED_HINT)
        if name not in self._loaded:
            self._loaded[name] = self.datasets[name]()
        return self._loaded[name]

    @property
    def model_source(self) -> dict[str, Any]:
        """The recipe's `model:` section; only for stages that declared they read it."""
        if self.source is None:
            raise StageError(f"stage '{self.stage_id}' reads the model source, which it did "
                             "not declare", "set `reads_source = True` on the op")
        return self.source


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
    extra: ClassVar[str | None] = None  # the pip extra its tools come with
    # Reads the recipe's model source even when an upstream artifact is its input
    # (a pruned PyTorch model is rebuilt by the factory, then its pruning plan replayed).
    reads_source: ClassVar[bool] = False
    # Bakes the inputs' example shapes into what it produces (onnx-to-tf pins them): a
    # target that selects shape profiles gets its own stage, at its first profile.
    fixes_shapes: ClassVar[bool] = False
    # Params naming a `module:fn` or `file.py:fn` the stage calls (prune's `finetune`):
    # the function's source file enters the stage's key, so editing it rebuilds, and a
    # `file.py` travels to a remote worker like the model's factory (execute/remote/carry.py).
    callable_params: ClassVar[tuple[str, ...]] = ()
    # What it asks its target's backend before doing anything else: "latency" and
    # "accuracy" (`unmeasurable_reason`), "build" (`build_on_device`). The driver asks
    # `Backend.probe` the same first, so a device that is not attached costs no worker
    # process on a cached re-run (execute/remote/probe.py). "": it asks nothing.
    probes: ClassVar[str] = ""

    def tool_names(self, target: Target | None) -> tuple[str, ...]:
        """Distributions whose installed versions belong in this stage's key."""
        return self.tools

    def host_bound(self, params: dict[str, Any]) -> bool:
        """Whether its result depends on the CPU it runs on (cache/keys.host_cpu enters
        its key): a latency, an inference on the host (INT8 kernels differ per ISA)."""
        return self.probes in ("latency", "accuracy")

    def datasets(self, params: BaseModel, target: Target | None) -> tuple[str, ...]:
        """The recipe datasets this stage reads: every DatasetRef in its params."""
        return dataset_names(params)

    def binds_inputs(self, params: BaseModel) -> tuple[str, ...]:
        """Model inputs this stage binds into its output graph as constants (`fold-inputs`):
        the planner tells every later stage of the chain that the model no longer has
        them, so no runner, dataset or latency feed gives them."""
        return ()

    @abstractmethod
    def run(self, ctx: StageContext, params: Any) -> OpResult:
        """Do the work; write every output file under `ctx.out`."""
