"""Recipe + target profiles -> a networkx DAG of stages, shared prefixes merged.

Each target's chain is built independently, then identical stages collapse
into one node, so a recipe with three targets exports the model once::

    export-onnx ── onnx-optimize ─┬─ compile@host-cpu ── measure-latency@host-cpu
                                  └─ compile@rpi4     ── measure-latency@rpi4

Formats are checked while chaining: each op declares what it accepts and
produces, and a mismatch is a PlanError naming both stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from edgebuild.cache.digest import canonical_json
from edgebuild.errors import PlanError
from edgebuild.plan.stage import Stage
from edgebuild.recipe.loader import LoadedRecipe
from edgebuild.recipe.models import PassSpec
from edgebuild.registry import backend_entry, load_op

if TYPE_CHECKING:
    import networkx as nx


# (from format, to format) -> the op the planner inserts when a chain needs it:
# a PyTorch model meeting an ONNX consumer is exported; an ONNX model meeting a
# backend that takes a TensorFlow SavedModel (TFLite) goes through onnx2tf.
IMPLICIT: dict[tuple[str, str], str] = {
    ("pytorch", "onnx"): "export-onnx",
    ("onnx", "tf-savedmodel"): "onnx-to-tf",
}


def implicit_path(fmt: str, accepts: tuple[str, ...]) -> list[str] | None:
    """The shortest list of IMPLICIT ops from `fmt` to one of `accepts` ([] if none needed)."""
    paths: dict[str, list[str]] = {fmt: []}
    frontier = [fmt]
    while frontier:
        current = frontier.pop(0)
        if current in accepts:
            return paths[current]
        for (source, result), op_name in IMPLICIT.items():
            if source == current and result not in paths:
                paths[result] = [*paths[current], op_name]
                frontier.append(result)
    return None


@dataclass
class TargetStages:
    """The stages whose results one target's report is made of."""

    compiled: str
    chain: list[str] = field(default_factory=list)  # the target's pass stages, in order
    reference: str | None = None
    infer: str | None = None
    latency: str | None = None
    compare: str | None = None  # A/B latency against a baseline artifact


@dataclass
class Plan:
    recipe: LoadedRecipe
    graph: nx.DiGraph
    targets: dict[str, TargetStages] = field(default_factory=dict)

    def stage(self, stage_id: str) -> Stage:
        stage: Stage = self.graph.nodes[stage_id]["stage"]
        return stage

    def order(self) -> list[Stage]:
        """Topological order, ties broken by insertion order so output is stable."""
        import networkx as nx

        position = {s: i for i, s in enumerate(self.graph.nodes)}
        ids = nx.lexicographical_topological_sort(self.graph, key=lambda s: position[s])
        return [self.stage(s) for s in ids]


class _Builder:
    def __init__(self, loaded: LoadedRecipe) -> None:
        import networkx as nx

        self.loaded = loaded
        self.graph: nx.DiGraph = nx.DiGraph()
        self._by_identity: dict[str, str] = {}

    def add(self, op: str, params: dict[str, Any], inputs: dict[str, str],
            target: str | None = None, **flags: Any) -> str:
        """Add a stage, or return the id of an identical one already in the graph."""
        identity = canonical_json([op, params, sorted(inputs.items()), target,
                                   sorted(flags.items())])
        if identity in self._by_identity:
            return self._by_identity[identity]
        fields = load_op(op).dataset_fields
        flags["datasets"] = tuple(sorted({str(params[f]) for f in fields if params.get(f)}))
        base = f"{op}@{target}" if target else op
        stage_id, n = base, 1
        while stage_id in self.graph:
            n += 1
            stage_id = f"{base}#{n}"
        stage = Stage(stage_id, op, canonical_json(params), tuple(sorted(inputs.items())),
                      target, **flags)
        self.graph.add_node(stage_id, stage=stage)
        for upstream in inputs.values():
            self.graph.add_edge(upstream, stage_id)
        self._by_identity[identity] = stage_id
        return stage_id


class _Chain:
    """One target's passes, appended in order, with the format checked at each step."""

    def __init__(self, builder: _Builder, target: str, source: str | None,
                 fmt: str) -> None:
        self.b = builder
        self.target = target
        self.current = source
        self.fmt = fmt
        self.producer = "the model source"
        self.ids: list[str] = [source] if source else []

    def _mismatch(self, consumer: str, accepts: tuple[str, ...]) -> PlanError:
        return PlanError(
            f"target '{self.target}': '{consumer}' takes {' or '.join(accepts)}, but "
            f"'{self.producer}' before it produces {self.fmt}",
            f"reorder or add passes so that something producing {accepts[0]} comes "
            f"before '{consumer}'")

    def reach(self, accepts: tuple[str, ...], consumer: str) -> None:
        """Insert the implicit conversions (IMPLICIT) that lead to a format `accepts` takes."""
        if "*" in accepts:
            return
        path = implicit_path(self.fmt, accepts)
        if path is None:
            raise self._mismatch(consumer, accepts)
        for op_name in path:
            self.add(op_name, {}, implicit=True)

    def add(self, op_name: str, params: dict[str, Any], implicit: bool = False) -> None:
        op = load_op(op_name)
        self.reach(op.accepts, op_name)
        validated = op.Params.model_validate(params).model_dump(mode="json")
        inputs = {"model": self.current} if self.current else {}
        self.current = self.b.add(op_name, validated, inputs,
                                  self.target if op.target_specific else None,
                                  uses_source=self.current is None, implicit=implicit)
        self.ids.append(self.current)
        self.fmt, self.producer = op.produces, op_name


def build_plan(loaded: LoadedRecipe,
               baselines: dict[str, dict[str, Any]] | None = None) -> Plan:
    """The stage graph; `baselines` (target -> CompareLatency params) adds A/B stages."""
    recipe = loaded.recipe
    b = _Builder(loaded)
    plan = Plan(loaded, b.graph)
    from_torch = recipe.model.factory is not None
    source = None if from_torch else b.add("import-onnx", {}, {}, uses_source=True)
    for name, entry in recipe.targets.items():
        info = loaded.targets[name]
        chain = _Chain(b, name, source, "pytorch" if from_torch else "onnx")
        inherited = recipe.passes if entry.inherit_passes else []
        passes: list[PassSpec] = [*inherited, *entry.passes]
        for spec in passes:
            chain.add(spec.name, spec.params)
        backend = backend_entry(info.backend)
        chain.reach(backend.accepts, f"backend {info.backend}")
        inputs = {"model": chain.current} if chain.current else {}
        # A backend that quantizes while it converts reads calibration data itself.
        calibration = info.options.get("calibration_dataset")
        compiled = b.add("compile", {"calibration": calibration} if calibration else {},
                         inputs, name, uses_source=chain.current is None)
        stages = TargetStages(compiled=compiled, chain=chain.ids)
        gates = entry.gates
        if gates.accuracy is not None:
            dataset = gates.accuracy.dataset
            stages.reference = b.add("reference", {"dataset": dataset},
                                     {"model": source} if source else {}, uses_source=True)
            stages.infer = b.add("infer", {"dataset": dataset}, {"model": compiled}, name,
                                 measures=True)
        if gates.latency is not None:
            stages.latency = b.add("measure-latency", {}, {"model": compiled}, name,
                                   measures=True)
            if baselines and name in baselines:
                stages.compare = b.add("compare-latency", baselines[name],
                                       {"model": compiled}, name, measures=True)
        plan.targets[name] = stages
    return plan
