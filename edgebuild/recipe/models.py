"""The recipe schema (pydantic v2, unknown keys forbidden).

docs/recipe-reference.md and docs/recipe.schema.json are generated from these
classes by `edgebuild schema`; change them together.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from edgebuild.recipe.accuracy import (
    CLASS_LIMITS,
    DETECTION_KEYS,
    DETECTION_LIMITS,
    LABELLED_BOX_KEYS,
    VALUE_LIMITS,
    AccuracyGate,
    AccuracyTask,
    OutputSlice,
)
from edgebuild.recipe.common import FileRef, MeasureOverrides, Strict
from edgebuild.recipe.custom_ops import CustomOp, check_op_types
from edgebuild.recipe.datasets import DatasetSpec
from edgebuild.recipe.inputs import TensorSpec
from edgebuild.recipe.prepost import PrePost
from edgebuild.recipe.stream import StatePair

__all__ = ["CLASS_LIMITS", "DETECTION_KEYS", "DETECTION_LIMITS", "LABELLED_BOX_KEYS",
           "VALUE_LIMITS", "AccuracyGate", "AccuracyTask", "OutputSlice", "TensorSpec"]


class ModelSource(Strict):
    """Where the model comes from: a PyTorch factory (+ weights) or an ONNX file."""

    factory: str | None = Field(
        None,
        description="`package.module:callable` or `path/to/file.py:callable`; "
        "attributes may be dotted (`module:Class.from_name`).",
    )
    args: list[Any] = Field(default_factory=list, description="Positional factory arguments.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Factory keyword arguments.")
    weights: FileRef | None = Field(
        None, description="A state_dict loaded with `torch.load(weights_only=True)`."
    )
    weights_prefix: dict[str, str] = Field(
        default_factory=dict, description="Rename the checkpoint's key prefixes before "
        "loading, e.g. `{\"module.\": \"\"}` for weights saved from a DataParallel wrapper.")
    onnx: FileRef | None = Field(None, description="An existing ONNX model instead of a factory.")
    prepost: PrePost | None = Field(
        None, description="Normalisation of a raw uint8 image and NMS built into the model "
        "(around a PyTorch factory's module, or composed onto an ONNX source's graph), so "
        "every artifact takes pixels and returns detections.")

    @model_validator(mode="after")
    def _one_source(self) -> ModelSource:
        if self.factory is not None and not re.match(r"^[^:\s]+:[A-Za-z_][\w.]*$", self.factory):
            raise ValueError(f"factory '{self.factory}' names no callable: write "
                             "`package.module:callable` or `path/to/file.py:callable`")
        if (self.factory is None) == (self.onnx is None):
            raise ValueError("give exactly one of `factory` (PyTorch) or `onnx`")
        if self.onnx is not None and (self.weights is not None or self.args or self.kwargs
                                      or self.weights_prefix):
            raise ValueError("`weights`, `weights_prefix`, `args` and `kwargs` belong to "
                             "`factory`, not `onnx`")
        if self.weights_prefix and self.weights is None:
            raise ValueError("`weights_prefix` renames the keys of `weights:`, which is not set")
        return self


class PassSpec(Strict):
    """One pass with its parameters; written `- name` or `- name: {param: value}`."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_yaml_shape(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"name": value, "params": {}}
        if isinstance(value, dict) and "name" not in value:
            if len(value) != 1:
                raise ValueError("write a pass as `- name` or `- name: {params}` (one key)")
            ((name, params),) = value.items()
            return {"name": name, "params": params or {}}
        return value


class OnNoisy(StrEnum):
    """What a missed latency budget means when the machine was loaded while timing."""

    FAIL = "fail"  # the budget is absolute: missed is failed, however busy the machine was
    UNDECIDED = "undecided"  # missed under load: undecided, and policy.undecided decides


def _all_or_each(value: Any) -> str:
    return "each" if isinstance(value, dict) else "all"


PositiveMs = Annotated[float, Field(gt=0)]
# Tagged by shape, like the accuracy gates: a mistake is reported once, at its key.
Budget = Annotated[
    Annotated[PositiveMs, Tag("all")] | Annotated[dict[str, PositiveMs], Tag("each")],
    Discriminator(_all_or_each)]


class LatencyGate(Strict):
    """Latency budget on one percentile, measured with the protocol in docs/gates.md."""

    budget_ms: Budget = Field(
        description="Budget in milliseconds for the percentile: one number for every shape "
        "profile, or `{profile: ms}` naming every profile in `shapes:` "
        "(docs/gates.md#shape-profiles).")
    percentile: Literal[50, 90, 99] = Field(50, description="Which percentile is gated.")
    max_regression_pct: float = Field(
        10.0, gt=0, le=1000,
        description="With `run --baseline`: slowest allowed change vs the baseline, percent.")
    on_noisy: OnNoisy = Field(
        OnNoisy.FAIL, description="`fail`: a missed budget fails, however loaded the machine "
        "was; `undecided`: a budget missed while the load per core exceeded `max_load` is "
        "undecided (\"machine too noisy\"), `policy.undecided` decides what that does to the "
        "run, and the figure is not kept in the cache (the next run measures again).")
    max_load: float = Field(
        1.0, gt=0, le=100, description="With `on_noisy: undecided`: the largest 1-minute load "
        "average per core (the larger of the values read before and after timing, divided by "
        "the cores) under which a missed budget still fails.")

    @model_validator(mode="after")
    def _load_needs_mode(self) -> LatencyGate:
        if "max_load" in self.model_fields_set and self.on_noisy is not OnNoisy.UNDECIDED:
            raise ValueError("max_load is only used with `on_noisy: undecided`; add it, or "
                             "remove max_load")
        return self

    def budget_for(self, profile: str) -> float | None:
        """The budget of one shape profile (the loader checks every profile has one)."""
        if isinstance(self.budget_ms, dict):
            return self.budget_ms.get(profile)
        return self.budget_ms


class SpeedupGate(Strict):
    """This build against another target's, timed interleaved in one process."""

    over: str = Field(description="The target to beat: another target of this recipe on "
                      "the same backend (e.g. the FP32 build an INT8 target replaces).")
    min_speedup: float = Field(
        gt=0, le=1000, description="Least speed-up, as that target's median latency over "
        "this one's: 1.2 = at least 1.2× as fast. Decided on the 95 % interval of the "
        "paired ratio (docs/gates.md#speed-up), per shape profile.")


class ThroughputGate(Strict):
    """Inferences per second with several requests in flight (docs/gates.md#throughput)."""

    min_fps: float = Field(gt=0, description="Least inferences per second, all streams "
                           "together.")
    streams: int | None = Field(
        None, ge=1, le=64, description="Requests in flight. Default: the runtime's own "
        "recommendation (OpenVINO's THROUGHPUT hint), else one runner per thread of "
        "`measure.threads`, each with one thread.")
    seconds: float = Field(3.0, gt=0, le=600, description="How long requests are timed, "
                           "after 0.5 s of warm-up.")
    on_noisy: OnNoisy = Field(
        OnNoisy.UNDECIDED, description="A `min_fps` missed while other processes took more "
        "than `measure.max_busy_share` of the CPU: `undecided` (others' load can explain "
        "it) or `fail`. A pass under load stands: load only lowers the figure.")


class SizeGate(Strict):
    """Size of the final artifact."""

    max_mb: float = Field(gt=0, description="Largest artifact size, MB (10^6 bytes).")


class MemoryGate(Strict):
    """Peak resident memory of the runtime for load + inference (docs/gates.md#memory)."""

    max_mb: float = Field(gt=0, description="Largest peak resident memory of the runtime "
                          "for loading the artifact and running it, MB (10^6 bytes), "
                          "measured in a fresh process on the target's device; undecided "
                          "(not measurable here) where its backend cannot measure it.")


def _one_or_many(value: Any) -> str:
    return "many" if isinstance(value, list) else "one"


# Tagged by shape, so a mistake inside a single gate is reported once, not also as
# "input should be a valid list".
OneOrMoreAccuracyGates = Annotated[
    Annotated[AccuracyGate, Tag("one")] | Annotated[list[AccuracyGate], Tag("many")],
    Discriminator(_one_or_many)]


class Gates(Strict):
    """The gates of one target; each is optional."""

    accuracy: OneOrMoreAccuracyGates | None = Field(
        None, description="One accuracy gate, or a list of them (one per output and dataset: "
        "each dataset is inferred once).")
    latency: LatencyGate | None = None
    speedup: SpeedupGate | None = None
    throughput: ThroughputGate | None = None
    size: SizeGate | None = None
    memory: MemoryGate | None = None

    @property
    def accuracy_gates(self) -> list[AccuracyGate]:
        if self.accuracy is None:
            return []
        return self.accuracy if isinstance(self.accuracy, list) else [self.accuracy]

    @model_validator(mode="after")
    def _one_gate_per_output_and_dataset(self) -> Gates:
        gates = self.accuracy_gates
        if isinstance(self.accuracy, list) and not gates:
            raise ValueError("`accuracy: []` checks nothing; remove it or add a gate")
        checked = [(g.dataset, g.output or g.boxes, g.part_label, g.task) for g in gates]
        if len(set(checked)) != len(checked):
            raise ValueError("two accuracy gates check the same output on the same dataset "
                             "with the same task; name each `output:` (or a different "
                             "`slice:`), give them different datasets, or merge their limits")
        return self

    @property
    def accuracy_datasets(self) -> list[str]:
        """The datasets the accuracy gates read, each once, in the order written."""
        return list(dict.fromkeys(g.dataset for g in self.accuracy_gates))


# Names that become folder names (the recipe's, a target's, a search candidate's):
# no separators, no `.`/`..`, no control characters, so no name can point outside
# --out (edgebuild/core/paths.py checks every write and delete as well).
SAFE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.,=+-]*$"
CANDIDATE_NAME = SAFE_NAME
# A candidate's name goes into file names (`<op>@<target>[<candidate>].log`), with the
# target's (at most 100): together they stay well under a file system's 255 bytes.
MAX_CANDIDATE_NAME = 100


class SearchCandidate(Strict):
    """One configuration a target's search builds, gates and times (docs/recipes.md#search)."""

    passes: list[PassSpec] = Field(
        default_factory=list, description="Passes added after the target's passes.")
    inherit_passes: bool = Field(
        True, description="false: use only this candidate's `passes` (not the recipe's or "
        "the target's).")
    options: dict[str, Any] = Field(
        default_factory=dict, description="Backend option overrides, on top of the target's.")
    measure: MeasureOverrides | None = Field(
        None, description="Measurement overrides, on top of the target's.")
    grid: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="`pass.param` (dotted for nested params, e.g. "
        "`quantize.accuracy_aware.max_drop`), `options.key` or `measure.key` -> values: "
        "one candidate per combination, named `<name>-<value>-…`.")

    @field_validator("grid")
    @classmethod
    def _values_given(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in grid.items():
            if not values:
                raise ValueError(f"grid key '{key}' lists no values")
        return grid


class Search(Strict):
    """Build every candidate, gate each, and keep the fastest that passes every gate."""

    candidates: dict[str, SearchCandidate] = Field(
        description="Candidate configurations by name (a grid expands one into several).")
    max_candidates: int = Field(
        16, ge=1, le=1000, description="Most candidates after grid expansion; more is an error.")
    max_minutes: float | None = Field(
        60.0, gt=0, description="Candidates not started within this many minutes of the "
        "search's start are reported as not tried (cached ones cost nothing); null: no limit.")

    @field_validator("candidates")
    @classmethod
    def _some_candidates(cls, candidates: dict[str, SearchCandidate]
                         ) -> dict[str, SearchCandidate]:
        if not candidates:
            raise ValueError("a search needs at least one candidate")
        for name in candidates:
            if not re.match(CANDIDATE_NAME, str(name)):
                raise ValueError(f"candidate name '{name}': use letters, digits and _ . , = + -")
        return candidates


class Unmeasurable(StrEnum):
    """What a target that cannot be measured on this machine does to the run."""

    FAIL = "fail"
    WARN = "warn"


class Undecided(StrEnum):
    """What a gate that measured but could not decide does to the run."""

    WARN = "warn"
    FAIL = "fail"


class Policy(Strict):
    """Run-wide decisions."""

    unmeasurable: Unmeasurable = Field(
        Unmeasurable.FAIL,
        description="`fail`: a gate that cannot be measured here fails the run; "
        "`warn`: it is reported and does not fail.",
    )
    undecided: Undecided = Field(
        Undecided.WARN,
        description="An undecided gate (a regression test whose interval straddles the "
        "threshold; a latency budget missed on a loaded machine with `on_noisy: undecided`): "
        "`warn` reports it as a skipped JUnit case and does not fail; `fail` fails the run.",
    )


class TargetEntry(Strict):
    """One build of the model for one hardware profile."""

    profile: str | None = Field(None, description="Profile name; default: this entry's key.")
    passes: list[PassSpec] = Field(
        default_factory=list, description="Passes added after the recipe-wide ones."
    )
    inherit_passes: bool = Field(
        True, description="false: use only this target's `passes` (e.g. to prune before "
        "exporting when the recipe-wide passes start with export-onnx).")
    options: dict[str, Any] = Field(
        default_factory=dict, description="Overrides of the profile's backend options."
    )
    measure: MeasureOverrides | None = None
    shapes: list[str] | None = Field(
        None, min_length=1, description="The shape profiles (of the recipe's `shapes:`) "
        "this target is built and measured at, default all of them. The first is its build "
        "shape: TFLite pins it, OpenVINO static IR is built at it, TensorRT takes it as the "
        "opt shape. One target per size is how a backend with fixed shapes serves an image "
        "pyramid (docs/recipes.md#shape-profiles).")
    gates: Gates = Field(default_factory=Gates)
    search: Search | None = Field(
        None, description="Try several configurations and keep the fastest that passes "
        "every gate (docs/recipes.md#search).")
    policy: Policy | None = Field(
        None, description="This target's run-wide decisions, instead of the recipe's "
        "(e.g. `unmeasurable: warn` for a phone target in a recipe CI gates on).")


class Recipe(Strict):
    """A model, the hardware to build it for, the passes, and the gates."""

    name: str = Field(pattern=SAFE_NAME, max_length=100,
                      description="Used for the output folder: letters, digits and _ . , = + -, "
                      "starting with a letter or digit.")
    description: str = Field("", description="One line for reports and reviewers.")
    model: ModelSource = Field(description="Where the model comes from.")
    inputs: list[TensorSpec] = Field(min_length=1, description="The model's inputs, in order.")
    outputs: list[str] = Field(default_factory=lambda: ["output"], min_length=1,
                               description="Output names; the first is the one gates compare.")
    state: list[StatePair] = Field(
        default_factory=list, description="Recurrent states: each pairs a state input with "
        "the output that feeds it at the next step. A dataset with `stream:` is then "
        "evaluated step by step, each build carrying its own state; latency times one step "
        "(docs/recipes.md#streams).")
    shapes: dict[str, dict[str, Annotated[int, Field(ge=1)]]] = Field(
        default_factory=dict, description="Shape profiles every target is measured at (and "
        "OpenVINO/TensorRT bound their dynamic dimensions by): profile name -> {dynamic axis "
        "name (from `inputs[].dynamic_axes`) -> size}. A name is shared by every input using "
        "it; an axis a profile leaves out keeps its example size. Default: one profile, "
        "`example`, the declared shapes (docs/recipes.md#shape-profiles).")
    datasets: dict[str, DatasetSpec] = Field(
        default_factory=dict, description="Named datasets for gates and calibration.")
    custom_ops: dict[str, CustomOp] = Field(
        default_factory=dict, description="Operators outside the standard ONNX opsets, by ONNX "
        "op type: schema, export mode and a kernel or decomposition per backend "
        "(docs/custom-ops.md).")
    passes: list[PassSpec] = Field(default_factory=list,
                                   description="Passes applied for every target, in order.")
    targets: dict[str, TargetEntry] = Field(
        min_length=1, description="Builds by name; the name is the profile unless `profile:`.")
    policy: Policy = Field(default_factory=Policy)

    def policy_for(self, target: str) -> Policy:
        """The policy that decides for `target` (a search candidate: its target's)."""
        entry = self.targets.get(target.split("[", 1)[0])
        return entry.policy if entry is not None and entry.policy is not None else self.policy

    _check_op_types = field_validator("custom_ops")(check_op_types)

    def io_declarations(self, target: str | None = None,
                        build_profile: str | None = None) -> dict[str, Any]:
        """What every stage is told about the model's tensors (and keyed on): inputs,
        outputs, and the shape profiles when the recipe declares any.

        For a target whose entry selects profiles (`shapes: [p256]`), only those, and
        the first one's sizes become the inputs' example shapes: every backend that
        fixes a shape builds at the example shape, so that is how it builds at p256.
        A shared stage that fixes shapes is told its `build_profile` the same way.
        """
        inputs = [t.declaration() for t in self.inputs]
        io: dict[str, Any] = {"inputs": inputs, "outputs": list(self.outputs)}
        if self.state:  # left out without one: a recipe without state keeps its keys
            io["state"] = [{"input": p.input, "output": p.output, "initial": p.initial_value}
                           for p in self.state]
            first = {p.input: p.initial_value for p in self.state}
            for tensor in inputs:  # latency and generated inputs start from it too
                if tensor["name"] in first and tensor.get("value") is None:
                    tensor["value"] = first[tensor["name"]]
        if not self.shapes:
            return io
        entry = self.targets.get(target.split("[", 1)[0]) if target else None
        selected = entry.shapes if entry is not None else None
        if build_profile is not None:
            selected = [build_profile]
        chosen = selected or list(self.shapes)
        io["shapes"] = {name: dict(self.shapes[name]) for name in chosen}
        if selected:
            from edgebuild.core.shapes import resolve

            build = resolve(inputs, {chosen[0]: self.shapes[chosen[0]]})[chosen[0]]
            for tensor in inputs:
                tensor["shape"] = build[tensor["name"]]
        return io

    @field_validator("shapes")
    @classmethod
    def _profile_names(cls, shapes: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        for name in shapes:
            if not re.match(SAFE_NAME, str(name)) or len(str(name)) > 60:
                raise ValueError(f"shape profile name '{name}': use letters, digits and "
                                 "_ . , = + -, starting with a letter or digit")
        return shapes

    @field_validator("inputs")
    @classmethod
    def _unique_inputs(cls, inputs: list[TensorSpec]) -> list[TensorSpec]:
        names = [i.name for i in inputs]
        if len(set(names)) != len(names):
            raise ValueError(f"input names must be unique: {names}")
        return inputs
