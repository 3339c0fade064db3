"""Recipe + target profiles -> a DAG of stages (plan/graph.py), shared prefixes merged.

Each target's chain is built independently, then identical stages collapse
into one node, so a recipe with three targets exports the model once::

    export-onnx ── onnx-optimize ─┬─ compile@host-cpu ── measure-latency@host-cpu
                                  └─ compile@rpi4     ── measure-latency@rpi4

Formats are checked while chaining: each op declares what it accepts and
produces, and a mismatch is a PlanError naming both stages.

A target with `search:` gets one such chain per candidate, built for the
candidate's own target name (`compile@host-cpu[int8-entropy]`), and a `select`
stage that times the candidates that pass every gate against each other::

    onnx-optimize ─┬─ quantize[int8-entropy] ─ compile@T[int8-entropy] ─┬─ select@T
                   └─ compile@T[fp32] ──────────────────────────────────┘

The select stage drawn here names every candidate; which of them it really
compares is decided when their gates are known (edgebuild/run/search.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgebuild.core.digest import canonical_json
from edgebuild.core.where import Where
from edgebuild.errors import PlanError, did_you_mean
from edgebuild.plan.graph import StageGraph
from edgebuild.plan.stage import Stage
from edgebuild.recipe.loader import LoadedRecipe
from edgebuild.recipe.models import Gates, PassSpec
from edgebuild.registry import backend_class, conversions, load_op


def implicit_path(fmt: str, accepts: tuple[str, ...],
                  table: dict[tuple[str, str], str]) -> list[str] | None:
    """The shortest list of conversion passes from `fmt` to one of `accepts` ([] if none
    is needed), breadth-first over `table` ((from, to) -> pass, registry.conversions())."""
    paths: dict[str, list[str]] = {fmt: []}
    frontier = [fmt]
    while frontier:
        current = frontier.pop(0)
        if current in accepts:
            return paths[current]
        for (source, result), op_name in table.items():
            if source == current and result not in paths:
                paths[result] = [*paths[current], op_name]
                frontier.append(result)
    return None


@dataclass
class TargetStages:
    """The stages whose results one target's (or search candidate's) report is made of."""

    compiled: str  # for a search target: its select stage (the winner is known only later)
    device_build: str | None = None  # what the device runs, built there (placement)
    chain: list[str] = field(default_factory=list)  # the target's pass stages, in order
    # accuracy dataset -> its FP32 `reference` stage / the artifact's `infer` stage
    # (one pair per dataset the accuracy gates read, shared by the gates on it)
    references: dict[str, str] = field(default_factory=dict)
    infers: dict[str, str] = field(default_factory=dict)
    latency: str | None = None
    compare: str | None = None  # A/B latency against a baseline artifact
    speedup: str | None = None  # A/B latency against another target's build
    throughput: str | None = None  # FPS with several requests in flight
    search: SearchStages | None = None


@dataclass
class SearchStages:
    """A search target's candidates (in recipe order) and the stage that picks one."""

    candidates: dict[str, TargetStages]  # candidate name -> its own chain and measurements
    select: str


@dataclass
class Plan:
    recipe: LoadedRecipe
    graph: StageGraph
    targets: dict[str, TargetStages] = field(default_factory=dict)

    def stage(self, stage_id: str) -> Stage:
        stage: Stage = self.graph.nodes[stage_id]["stage"]
        return stage

    def order(self) -> list[Stage]:
        """Topological order, ties broken by insertion order so output is stable."""
        position = {s: i for i, s in enumerate(self.graph.nodes)}
        return [self.stage(s) for s in self.graph.ordered(key=position.__getitem__)]


class _Builder:
    def __init__(self, loaded: LoadedRecipe) -> None:
        self.loaded = loaded
        self.graph = StageGraph()
        self._by_identity: dict[str, str] = {}
        self.conversions = conversions()

    def add(self, op: str, params: dict[str, Any], inputs: dict[str, str],
            target: str | None = None, label: str | None = None, name: str | None = None,
            **flags: Any) -> str:
        """Add a stage, or return the id of an identical one already in the graph.

        `label` names a stage that is not target-specific (`quantize[int8-entropy]`);
        it is not part of its identity, so identical stages still merge. `name`: the
        stage's id (made unique), instead of one derived from op, target and label.
        """
        # Any stage may load a model holding a custom node (a session deep in a pass
        # or a runner), so with custom ops declared every stage reads them, and their
        # kernel files are in every key.
        flags["custom_ops"] = bool(self.loaded.recipe.custom_ops)
        identity = canonical_json([op, params, sorted(inputs.items()), target,
                                   sorted(flags.items())])
        if identity in self._by_identity:
            return self._by_identity[identity]
        op_class = load_op(op)
        info = self.loaded.targets[target] if target else None
        # Every dataset the stage reads, found in its params at any depth: in its key.
        flags["datasets"] = op_class().datasets(op_class.Params.model_validate(params), info)
        label = label or flags.get("build_profile")  # onnx-to-tf[p256]
        base = name or (f"{op}@{target}" if target else f"{op}[{label}]" if label else op)
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
        self.label: str | None = None  # names the pass stages a search candidate adds
        self.current = source
        self.fmt = fmt
        self.producer = "the model source"
        self.ids: list[str] = [source] if source else []
        self.folded: tuple[str, ...] = ()  # inputs a stage of the chain bound into the graph

    def folding(self) -> dict[str, Any]:
        """The flag every stage after a `fold-inputs` carries (none before one)."""
        return {"folded": self.folded} if self.folded else {}

    def _bind(self, op_name: str, bound: tuple[str, ...]) -> None:
        """Record inputs `op_name` binds; each must be a declared input with a `value:`."""
        declared = {t.name: t for t in self.b.loaded.recipe.inputs}
        for name in bound:
            if name not in declared:
                raise PlanError(f"target '{self.target}': '{op_name}' binds input '{name}', "
                                "which the recipe does not declare",
                                did_you_mean(name, declared) or
                                f"declared inputs: {', '.join(declared)}")
            if declared[name].value is None:
                raise PlanError(f"target '{self.target}': '{op_name}' binds input '{name}', "
                                "which declares no `value:`",
                                f"declare the value the app always feeds, e.g. `{{name: "
                                f"{name}, ..., value: 16000}}`: only a constant can be folded")
            if name in self.folded:
                raise PlanError(f"target '{self.target}': input '{name}' is bound twice",
                                f"an earlier '{op_name}' of this chain bound it already")
        self.folded = tuple(sorted({*self.folded, *bound}))

    def _mismatch(self, consumer: str, accepts: tuple[str, ...]) -> PlanError:
        return PlanError(
            f"target '{self.target}': '{consumer}' takes {' or '.join(accepts)}, but "
            f"'{self.producer}' before it produces {self.fmt}",
            f"reorder or add passes so that something producing {accepts[0]} comes "
            f"before '{consumer}'")

    def _decomposing(self, params: dict[str, Any]) -> dict[str, Any]:
        """export-onnx params with the custom ops this target's backend gets decomposed:
        targets that differ there export twice, targets that agree share one export."""
        backend = self.b.loaded.targets[self.target].backend
        ops = self.b.loaded.recipe.custom_ops
        wanted = {n for n, op in ops.items() if op.decomposes_for(backend)}
        wanted |= set(params.get("decompose_custom_ops") or ())
        return {**params, "decompose_custom_ops": sorted(wanted)} if wanted else params

    def reach(self, accepts: tuple[str, ...], consumer: str) -> None:
        """Insert the conversion passes (registry.conversions) that reach `accepts`."""
        if "*" in accepts:
            return
        path = implicit_path(self.fmt, accepts, self.b.conversions)
        if path is None:
            raise self._mismatch(consumer, accepts)
        for op_name in path:
            self.add(op_name, {}, implicit=True)

    def add(self, op_name: str, params: dict[str, Any], implicit: bool = False) -> None:
        op = load_op(op_name)
        self.reach(op.accepts, op_name)
        if op_name == "export-onnx":
            params = self._decomposing(params)
        validated = op.Params.model_validate(params).model_dump(mode="json")
        inputs = {"model": self.current} if self.current else {}
        entry = self.b.loaded.recipe.targets.get(self.target.split("[", 1)[0])
        chosen = entry.shapes if entry is not None else None  # a search candidate: its target's
        flags = {"build_profile": chosen[0]} if chosen and op.fixes_shapes else {}
        self.current = self.b.add(op_name, validated, inputs,
                                  self.target if op.target_specific else None, self.label,
                                  uses_source=self.current is None or op.reads_source,
                                  implicit=implicit, **flags, **self.folding())
        self.ids.append(self.current)
        self.fmt, self.producer = op.produces, op_name
        bound = op().binds_inputs(op.Params.model_validate(validated))
        if bound:
            self._bind(op_name, bound)


def select_targets(loaded: LoadedRecipe, patterns: list[str]) -> list[str]:
    """The recipe's targets that match any of `patterns` (shell globs), in recipe order."""
    import fnmatch

    names = list(loaded.recipe.targets)
    for pattern in patterns:
        if not fnmatch.filter(names, pattern):
            raise PlanError(f"--target {pattern}: no target of {loaded.path.name} matches",
                            did_you_mean(pattern, names) or f"targets: {', '.join(names)}")
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def build_plan(loaded: LoadedRecipe, baselines: dict[str, dict[str, Any]] | None = None,
               only: list[str] | None = None, profiling: bool = False) -> Plan:
    """The stage graph; `baselines` (target -> import-baseline params) adds A/B stages;
    `only` (target names) builds just those targets and what they depend on. With
    `profiling` (`edgebuild profile`: run/profile.py), each target gets its chain, its
    compile and a measure-latency that takes a per-operator profile, and nothing its
    gates measure."""
    recipe = loaded.recipe
    b = _Builder(loaded)
    plan = Plan(loaded, b.graph)
    from_torch = recipe.model.factory is not None
    source = None if from_torch else b.add("import-onnx", {}, {}, uses_source=True)
    if source is not None and recipe.model.prepost is not None:
        # The composed graph is the source from here on: reference and targets alike.
        source = b.add("prepost-onnx", {}, {"model": source}, uses_source=True)
    for name in only if only is not None else recipe.targets:
        try:
            if profiling:
                _profiled(b, plan, name, source, from_torch)
            else:
                _target(b, plan, name, source, from_torch, baselines)
        except PlanError as exc:
            # Name the recipe line: the target whose chain or search could not be built.
            raise exc.at(loaded.doc.locate(("targets", name))[0]) from None
    for name, stages in plan.targets.items():
        gate = recipe.targets[name].gates.speedup
        if gate is not None and not profiling:
            runs = stages.device_build or stages.compiled
            folded: dict[str, Any] = ({"folded": plan.stage(runs).folded}
                                      if plan.stage(runs).folded else {})
            stages.speedup = b.add(
                "compare-speed", {"over": gate.over},
                {"model": runs, "baseline": _build_of(b, gate.over, source, from_torch)},
                name, measures=True, runs_on=Where.DEVICE, **folded)
    return plan


def _profiled(b: _Builder, plan: Plan, name: str, source: str | None,
              from_torch: bool) -> None:
    """One target's chain and compile, and a measure-latency with the profile on (its
    params say so unless the target's `measure.profile` already does: then the stage is
    the one a run with the recipe has, cached or not)."""
    entry = b.loaded.recipe.targets[name]
    if entry.search is not None:
        raise PlanError(f"target '{name}' is a search: which candidate it builds is known "
                        "only after a run", "set `measure: {profile: true}` on it and "
                        "`edgebuild run` it: the report shows the chosen candidate's profile")
    passes = [*(b.loaded.recipe.passes if entry.inherit_passes else []), *entry.passes]
    chain = _Chain(b, name, source, "pytorch" if from_torch else "onnx")
    plan.targets[name] = _measured(b, chain, passes, Gates(), source, None,
                                   always_latency=True, profile=True)


def _build_of(b: _Builder, name: str, source: str | None, from_torch: bool) -> str:
    """The stage whose artifact target `name` runs: its compile (or device build), the
    same stage its own chain has (identical stages merge), planned even when --target
    left that target out, without its gates."""
    entry = b.loaded.recipe.targets[name]
    passes = [*(b.loaded.recipe.passes if entry.inherit_passes else []), *entry.passes]
    chain = _Chain(b, name, source, "pytorch" if from_torch else "onnx")
    stages = _measured(b, chain, passes, Gates(), source, None)
    return stages.device_build or stages.compiled


def _target(b: _Builder, plan: Plan, name: str, source: str | None, from_torch: bool,
            baselines: dict[str, dict[str, Any]] | None) -> None:
    """Add one target's stages (a chain, or a search's chains and its select)."""
    loaded = b.loaded
    entry = loaded.recipe.targets[name]
    recipe = loaded.recipe
    inherited = recipe.passes if entry.inherit_passes else []
    passes: list[PassSpec] = [*inherited, *entry.passes]
    if entry.search is None:
        chain = _Chain(b, name, source, "pytorch" if from_torch else "onnx")
        plan.targets[name] = _measured(b, chain, passes, entry.gates, source,
                                       (baselines or {}).get(name))
        return
    candidates: dict[str, TargetStages] = {}
    built: dict[str, str] = {}  # what a candidate builds -> its name
    for candidate in loaded.searches[name]:
        chain = _Chain(b, candidate.target_name, source, "pytorch" if from_torch else "onnx")
        for spec in passes if candidate.inherit_passes else []:
            chain.add(spec.name, spec.params)
        chain.label = candidate.name
        stages = _measured(b, chain, list(candidate.passes), entry.gates, source, None,
                           always_latency=True)
        identity = canonical_json([plan.stage(stages.compiled).inputs,
                                   plan.stage(stages.compiled).params_json,
                                   loaded.targets[candidate.target_name].digest_data()])
        if identity in built:
            where = ("targets", name, "search", "candidates", candidate.origin)
            raise PlanError(f"target '{name}': search candidates '{built[identity]}' and "
                            f"'{candidate.name}' build the same thing",
                            "remove one, or make their passes or options differ"
                            ).at(loaded.doc.locate(where)[0])
        built[identity] = candidate.name
        candidates[candidate.name] = stages
    select = b.add("select", select_params(loaded, name, list(candidates)),
                   {c: s.compiled for c, s in candidates.items()}, name, measures=True,
                   runs_on=Where.DEVICE)
    plan.targets[name] = TargetStages(compiled=select,
                                      search=SearchStages(candidates, select))


def select_params(loaded: LoadedRecipe, target: str, names: list[str]) -> dict[str, Any]:
    """Params of a target's select stage comparing `names` (each with its own settings)."""
    found = []
    for name in names:
        info = loaded.targets[f"{target}[{name}]"]
        found.append({"name": name, "options": info.options,
                      "measure": info.measure.model_dump(mode="json")})
    params: dict[str, Any] = load_op("select").Params.model_validate(
        {"candidates": found}).model_dump(mode="json")
    return params


def _measured(b: _Builder, chain: _Chain, passes: list[PassSpec], gates: Gates,
              source: str | None, baseline: dict[str, Any] | None,
              always_latency: bool = False, profile: bool = False) -> TargetStages:
    """Append `passes` and the compile to `chain`, then the stages its gates measure.
    Each target stage is placed as the backend's `placement` says (Stage.runs_on); every
    timing (latency, throughput, A/B) is the device's."""
    name = chain.target
    info = b.loaded.targets[name]
    for spec in passes:
        chain.add(spec.name, spec.params)
    backend = backend_class(info.backend)
    chain.reach(backend.accepts, f"backend {info.backend}")
    inputs = {"model": chain.current} if chain.current else {}
    # The datasets the backend's options name (a calibration set) are found by
    # Compile.datasets, like any op's; a backend taking PyTorch reads the source.
    folded = chain.folding()  # what runs the build is told the inputs it no longer has
    placement = backend.placement
    compiled = b.add("compile", {}, inputs, name, uses_source=chain.current is None,
                     runs_on=placement.compile, **folded)
    stages = TargetStages(compiled=compiled, chain=chain.ids)
    runs = compiled  # what latency times: the compiled artifact, or the device's build of it
    if placement.device_build:
        runs = stages.device_build = b.add("device-build", {}, {"model": compiled}, name,
                                           runs_on=Where.DEVICE, **folded)
    for dataset in gates.accuracy_datasets:  # each inferred once, whatever checks it
        stages.references[dataset] = b.add("reference", {"dataset": dataset},
                                           {"model": source} if source else {},
                                           uses_source=True)
        stages.infers[dataset] = b.add("infer", {"dataset": dataset}, {"model": compiled},
                                       name, measures=True, runs_on=placement.accuracy,
                                       **folded)
    if gates.latency is not None or gates.memory is not None or always_latency \
            or info.measure.profile:
        # A memory gate asks measure-latency for the memory (measuring/profiling.py); without
        # one its params stay {} and its key what it was. `measure.profile` is read from
        # the target's settings (in the key with the rest of the profile).
        params = {"memory": True} if gates.memory is not None else {}
        if profile and not info.measure.profile:
            params["profile"] = True  # `edgebuild profile` (its own key: it profiles)
        stages.latency = b.add("measure-latency", params, {"model": runs}, name,
                               measures=True, runs_on=Where.DEVICE, **folded)
        if baseline is not None and (gates.latency is not None or always_latency):
            stages.compare = b.add("compare-latency", {},
                                   {"model": runs, "baseline": _baseline(b, name, baseline)},
                                   name, measures=True, runs_on=Where.DEVICE, **folded)
    if gates.throughput is not None:
        stages.throughput = b.add(
            "measure-throughput", gates.throughput.model_dump(include={"streams", "seconds"}),
            {"model": runs}, name, measures=True, runs_on=Where.DEVICE, **folded)
    return stages


def _baseline(b: _Builder, name: str, params: dict[str, Any]) -> str:
    """The stage whose artifact is the baseline as the device runs it: the imported build
    (measuring/import_baseline.py), and for a backend that builds on the device, its build
    there, so an engine is compared with an engine."""
    imported = b.add("import-baseline", params, {}, name)
    if not backend_class(b.loaded.targets[name].backend).placement.device_build:
        return imported
    return b.add("device-build", {}, {"model": imported}, name,
                 name=f"device-build[baseline]@{name}", runs_on=Where.DEVICE)


def own_stages(plan: Plan) -> dict[str, dict[str, list[str]]]:
    """target -> candidate -> the stages only that candidate needs, in plan order.

    A stage also used by another candidate, by a plain target or by anything
    outside the searches (a shared export, the FP32 reference) belongs to wave 0.
    """
    uses: dict[str, set[str]] = {}  # stage id -> the candidates that use it
    for target, stages in plan.targets.items():
        if stages.search is None:
            continue
        for name, cand in stages.search.candidates.items():
            for sid in candidate_ids(cand):
                uses.setdefault(sid, set()).add(f"{target}[{name}]")
    selects = {s.search.select for s in plan.targets.values() if s.search is not None}
    outside = [s for s in plan.graph if s not in uses and s not in selects]
    shared = set(outside)
    for sid in outside:
        shared |= plan.graph.ancestors(sid)
    position = {s: i for i, s in enumerate(plan.graph)}
    found: dict[str, dict[str, list[str]]] = {}
    for target, stages in plan.targets.items():
        if stages.search is None:
            continue
        found[target] = {}
        for name in stages.search.candidates:
            owner = f"{target}[{name}]"
            mine = [sid for sid, users in uses.items() if users == {owner} and sid not in shared]
            found[target][name] = sorted(mine, key=position.__getitem__)
    return found


def candidate_ids(stages: TargetStages) -> list[str]:
    ids = [*stages.chain, stages.compiled, stages.device_build, *stages.infers.values(),
           stages.latency]
    return [s for s in ids if s]
