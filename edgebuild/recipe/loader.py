"""Load a recipe and the target profiles it names, and check them together.

The profiles are found and loaded by profiles.py; the checks that need the whole recipe
and its profiles are `_CrossCheck` here: one rule per method, every problem at its YAML
position, all of them reported at once."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from edgebuild.core.datasets import dataset_refs
from edgebuild.core.profile import MeasureSettings
from edgebuild.core.shapes import EXAMPLE, axis_names
from edgebuild.core.target import Target
from edgebuild.errors import EdgebuildError, Location, Problem, RecipeError, did_you_mean
from edgebuild.recipe.code_refs import missing_code
from edgebuild.recipe.common import MeasureOverrides
from edgebuild.recipe.custom_ops import missing_kernel
from edgebuild.recipe.datasets import CallableDataset, ImageFolder
from edgebuild.recipe.models import (
    LABELLED_BOX_KEYS,
    MAX_CANDIDATE_NAME,
    SAFE_NAME,
    AccuracyGate,
    Gates,
    PassSpec,
    Recipe,
    TargetEntry,
)
from edgebuild.recipe.onnx_inputs import check_onnx_inputs
from edgebuild.recipe.profiles import LoadedProfile, load_profiles, profile_dirs
from edgebuild.recipe.search import Candidate, GridError, expand
from edgebuild.recipe.stream_check import check_stream
from edgebuild.recipe.validate import to_problem, validate
from edgebuild.recipe.yaml_loader import LoadedYaml, load_yaml


@dataclass(frozen=True)
class LoadedRecipe:
    path: Path
    recipe: Recipe
    doc: LoadedYaml
    # recipe target name -> resolved profile; a search candidate's as `target[candidate]`
    targets: dict[str, Target]
    # target name -> its search candidates, grids expanded, in recipe order
    searches: dict[str, list[Candidate]] = field(default_factory=dict)

    @property
    def base_dir(self) -> Path:
        return self.path.parent


def load_recipe(path: Path, targets_dirs: list[Path] | None = None) -> LoadedRecipe:
    """Parse, validate and cross-check a recipe; RecipeError lists every problem."""
    doc = load_yaml(path)
    if isinstance(doc.data, dict):
        doc.data.setdefault("name", path.stem)
    recipe, problems = validate(Recipe, doc)
    if recipe is None:
        raise RecipeError(problems)
    profiles = load_profiles(targets_dirs if targets_dirs is not None else profile_dirs(path))
    checker = _CrossCheck(recipe, doc, profiles, path.parent)
    targets = checker.run()
    if checker.problems:
        raise RecipeError(checker.problems)
    return LoadedRecipe(path, recipe, doc, targets, checker.searches)


class _CrossCheck:
    """Checks that need more than one part of the recipe, or the profiles."""

    def __init__(self, recipe: Recipe, doc: LoadedYaml,
                 profiles: dict[str, LoadedProfile], base_dir: Path) -> None:
        self.base_dir = base_dir
        self.recipe = recipe
        self.doc = doc
        self.profiles = profiles
        self.problems: list[Problem] = []
        self.searches: dict[str, list[Candidate]] = {}

    def _add(self, loc: tuple[str, ...], message: str, hint: str = "") -> None:
        location, found = self.doc.locate(loc)
        self.problems.append(Problem(location, ".".join(found or loc), message, hint))

    def run(self) -> dict[str, Target]:
        if self.recipe.custom_ops and self.recipe.model.factory is None:
            self._add(("custom_ops",), "custom ops are declared for a PyTorch model's export, "
                      "and this recipe's model is an ONNX file",
                      "give `model.factory`, or remove `custom_ops:`")
        self._passes(self.recipe.passes, ("passes",))
        self._shapes()
        for loc, message, hint in [*check_onnx_inputs(self.recipe, self.base_dir),
                                   *check_stream(self.recipe)]:
            self._add(loc, message, hint)
        self._code(self.recipe.model.factory, ("model", "factory"))
        inputs = [t.name for t in self.recipe.inputs]
        for name, dataset in self.recipe.datasets.items():
            if isinstance(dataset, CallableDataset):
                self._code(dataset.function, ("datasets", name, "function"))
            if dataset.input is not None and dataset.input not in inputs:
                self._add(("datasets", name, "input"), f"no model input '{dataset.input}'",
                          did_you_mean(dataset.input, inputs) or f"inputs: {', '.join(inputs)}")
        targets: dict[str, Target] = {}
        for name, entry in self.recipe.targets.items():
            loc = ("targets", name)
            if not re.match(SAFE_NAME, name) or len(name) > 100:
                self._add(loc, f"target name {name!r} cannot be a folder name",
                          "use letters, digits and _ . , = + -, starting with a letter or "
                          "digit (it names artifacts/<target>/ in --out)")
                continue
            self._passes(entry.passes, (*loc, "passes"))
            self._accuracy(entry.gates, (*loc, "gates", "accuracy"))
            self._target_shapes(entry.shapes, (*loc, "shapes"))
            self._budgets(entry.gates, (*loc, "gates", "latency", "budget_ms"),
                          entry.shapes)
            profile_name = entry.profile or name
            loaded = self.profiles.get(profile_name)
            if loaded is None:
                self._add((*loc, "profile") if entry.profile else loc,
                          f"no target profile named '{profile_name}'",
                          did_you_mean(profile_name, self.profiles)
                          or "see `edgebuild targets`, or set `profile:`")
                continue
            measure = self._measure(entry.measure, loaded.profile.measure, (*loc, "measure"))
            target = Target(name=name, profile=loaded.profile).variant(name, entry.options,
                                                                        measure)
            self._options(loaded, entry.options, target.options, loc)
            self._one_phone(target, loc)
            targets[name] = target
            self._custom_ops(name, target)
            if entry.search is not None:
                for candidate in self._search(name, entry, loaded, target):
                    targets[candidate.target_name] = self._candidate_info(candidate, target)
        for name, entry in self.recipe.targets.items():
            if entry.gates.speedup is not None and name in targets:
                self._speedup(name, entry, targets)
        return targets

    def _one_phone(self, target: Target, loc: tuple[str, ...]) -> None:
        """A phone is named once: the profile's `runs_on.serial` and a backend's deprecated
        `device_serial` option never name two different ones."""
        option = target.options.get("device_serial")
        serial = target.runs_on.serial
        if option is not None and serial is not None and option != serial:
            self._add((*loc, "options", "device_serial"),
                      f"device_serial {option!r} names another phone than runs_on.serial "
                      f"{serial!r}", "name the phone once, in the profile's `runs_on: {kind: "
                      "adb, serial: …}` (`device_serial` is deprecated)")

    def _speedup(self, name: str, entry: Any, targets: dict[str, Target]) -> None:
        """`speedup.over` is another plain target on this target's backend (one runner
        times both) with the same shape profiles."""
        gate = entry.gates.speedup
        loc = ("targets", name, "gates", "speedup", "over")
        other = self.recipe.targets.get(gate.over)
        if gate.over == name:
            self._add(loc, "a target cannot be compared with itself",
                      "name the target this one replaces, e.g. its FP32 build")
        elif other is None or gate.over not in targets:
            if other is None:
                self._add(loc, f"no target named '{gate.over}'",
                          did_you_mean(gate.over, self.recipe.targets)
                          or f"targets: {', '.join(self.recipe.targets)}")
        elif entry.search is not None or other.search is not None:
            self._add(loc, "a speed-up gate compares two plain targets, not a search",
                      "a search already keeps its fastest candidate (docs/recipes.md#search)")
        elif targets[gate.over].backend != targets[name].backend:
            self._add(loc, f"'{gate.over}' runs on {targets[gate.over].backend}, this target "
                      f"on {targets[name].backend}: one runner times both",
                      "compare targets of the same backend (one process, interleaved)")
        elif (other.shapes or None) != (entry.shapes or None):
            self._add(loc, f"'{gate.over}' is built at other shape profiles",
                      "give both targets the same `shapes:`")

    def _shapes(self) -> None:
        """Dynamic axes exist in their input; each profile binds only declared axis names."""
        for index, tensor in enumerate(self.recipe.inputs):
            for axis in tensor.dynamic_axes:
                if not 0 <= axis < len(tensor.shape):
                    self._add(("inputs", str(index), "dynamic_axes", str(axis)),
                              f"input '{tensor.name}' has {len(tensor.shape)} dimensions, so "
                              f"it has no axis {axis}",
                              f"axes are 0..{len(tensor.shape) - 1} of `shape: {tensor.shape}`")
        names = axis_names([t.model_dump() for t in self.recipe.inputs])
        for profile, sizes in self.recipe.shapes.items():
            for bound in sizes:
                if bound not in names:
                    self._add(("shapes", profile, bound),
                              f"shape profile '{profile}' binds '{bound}', which no input's "
                              "dynamic_axes names",
                              did_you_mean(bound, names) or (
                                  f"dynamic axis names: {', '.join(names)}" if names else
                                  "mark the variable dimension in `inputs[].dynamic_axes`, "
                                  "e.g. `{1: sequence}`"))

    def _target_shapes(self, chosen: list[str] | None, loc: tuple[str, ...]) -> None:
        """A target's `shapes:` lists profiles of the recipe's `shapes:`, each once."""
        if chosen is None:
            return
        profiles = list(self.recipe.shapes)
        if not profiles:
            self._add(loc, "the recipe declares no shape profiles to choose from",
                      "declare them under the recipe's `shapes:` (docs/recipes.md"
                      "#shape-profiles), or drop the target's `shapes:`")
            return
        for index, name in enumerate(chosen):
            if name not in profiles:
                self._add((*loc, str(index)), f"no shape profile named '{name}'",
                          did_you_mean(name, profiles) or
                          f"shape profiles: {', '.join(profiles)}")
            elif chosen.index(name) != index:
                self._add((*loc, str(index)), f"shape profile '{name}' is listed twice",
                          "list each profile once; the first is the build shape")

    def _budgets(self, gates: Gates, loc: tuple[str, ...],
                 chosen: list[str] | None = None) -> None:
        """A per-profile latency budget names the profiles the target is measured at."""
        if gates.latency is None or not isinstance(gates.latency.budget_ms, dict):
            return
        profiles = [p for p in chosen or self.recipe.shapes if p in self.recipe.shapes] \
            or [EXAMPLE]
        for profile in gates.latency.budget_ms:
            if profile not in profiles:
                self._add((*loc, profile), f"no shape profile named '{profile}'",
                          did_you_mean(profile, profiles) or (
                              f"shape profiles: {', '.join(profiles)}" if self.recipe.shapes
                              else "declare it under `shapes:`, or give one `budget_ms` "
                              "for the example shapes"))
        missing = [p for p in profiles if p not in gates.latency.budget_ms]
        if missing:
            self._add(loc, f"no budget for shape profile{'s' if len(missing) > 1 else ''} "
                      f"{', '.join(missing)}", "give every profile of `shapes:` a budget, or "
                      "one number for all of them")

    def _custom_ops(self, name: str, target: Target) -> None:
        """Each custom op has a kernel or a decomposition for this target's backend."""
        for op_name, op in self.recipe.custom_ops.items():
            problem = missing_kernel(op, target.backend)
            if problem:
                line = self.doc.locate(("targets", name))[0].line
                self._add(("custom_ops", op_name, "kernels"),
                          f"custom op '{op_name}' {problem}, which target '{name}' "
                          f"(line {line}) builds for",
                          f"add `kernels.{target.backend}:` (docs/custom-ops.md), or "
                          "remove the target")

    def _search(self, name: str, entry: TargetEntry, loaded: LoadedProfile,
                target: Target) -> list[Candidate]:
        """Expand and check a target's search candidates; the valid ones are returned."""
        from edgebuild.registry import pass_names
        assert entry.search is not None
        loc = ("targets", name, "search")
        if entry.gates.accuracy is None:
            self._add(loc, "a target with `search` needs `gates.accuracy`: without it the "
                      "fastest candidate would win whatever it computes",
                      "add e.g. `accuracy: {dataset: ..., min_top1_agreement: 99}`")
        found: list[Candidate] = []
        written: dict[str, str] = {}  # candidate name -> the key that produced it
        for key, spec in entry.search.candidates.items():
            here = (*loc, "candidates", key)
            if any(p.name not in pass_names() for p in spec.passes):
                self._passes(spec.passes, (*here, "passes"))  # a typo, before any grid
                continue
            try:
                expanded = expand(name, key, spec)
            except GridError as exc:
                self._add((*here, "grid", exc.key), exc.message, exc.hint)
                continue
            before = len(self.problems)
            for candidate in expanded:
                if len(candidate.name) > MAX_CANDIDATE_NAME:
                    self._long_name(candidate.name, here, bool(spec.grid))
                    break
                if candidate.name in written:
                    other = written[candidate.name]
                    self._add(here, f"candidate name '{candidate.name}' is used twice"
                              + (f" (also by '{other}')" if other != key else ""),
                              "rename one of the candidates")
                    continue
                written[candidate.name] = key
                note = f" (candidate '{candidate.name}')" if candidate.point else ""
                self._passes(list(candidate.passes), (*here, "passes"), note)
                if candidate.options:  # the target's own options are checked already
                    merged = self._candidate_info(candidate, target).options
                    self._options(loaded, candidate.options, merged, here)
                found.append(candidate)
            self._dedupe(before)
        total = len(found)
        if total > entry.search.max_candidates:
            where = "max_candidates" if "max_candidates" in entry.search.model_fields_set \
                else "candidates"
            self._add((*loc, where), f"{total} candidates (after grid expansion), more than "
                      f"max_candidates {entry.search.max_candidates}",
                      "raise `max_candidates`, or remove candidates or grid values")
        self.searches[name] = found
        return found

    def _long_name(self, name: str, here: tuple[str, ...], grid: bool) -> None:
        """A candidate name too long for a file name (reported without echoing it)."""
        if len(here[-1]) <= MAX_CANDIDATE_NAME and grid:
            self._add((*here, "grid"), f"candidate name '{name[:60]}…' has {len(name)} "
                      f"characters; at most {MAX_CANDIDATE_NAME} (it names stage folders and "
                      "logs)", "shorten the candidate's key or its grid's string values")
            return
        location, _ = self.doc.locate(here)
        self.problems.append(Problem(
            location, ".".join([*here[:-1], here[-1][:20] + "…"]),
            f"candidate name '{name[:40]}…' has {len(name)} characters; at most "
            f"{MAX_CANDIDATE_NAME} (it names stage folders and logs)",
            "shorten the candidate's key"))

    def _candidate_info(self, candidate: Candidate, target: Target) -> Target:
        where = ("targets", target.name, "search", "candidates", candidate.origin, "measure")
        measure = self._measure(candidate.measure, target.measure, where)
        return target.variant(candidate.target_name, candidate.options, measure)

    def _measure(self, overrides: MeasureOverrides | None, base: MeasureSettings,
                 loc: tuple[str, ...]) -> MeasureSettings | None:
        """The overrides applied to the profile's settings; a contradiction between the
        two (min_iterations above the profile's max) is a problem at the overrides."""
        if overrides is None:
            return None
        try:
            return overrides.apply(base)
        except ValidationError as exc:
            for err in exc.errors():
                self.problems.append(to_problem(err, MeasureSettings, self.doc, loc))
            return None

    def _dedupe(self, start: int) -> None:
        """A grid repeats one mistake in every combination: keep each problem once."""
        seen: set[tuple[str, str, str]] = set()
        kept = self.problems[:start]
        for problem in self.problems[start:]:
            marker = (str(problem.location), problem.key, problem.message.split(" (candidate")[0])
            if marker not in seen:
                seen.add(marker)
                kept.append(problem)
        self.problems = kept

    def _passes(self, passes: list[PassSpec], loc: tuple[str, ...], note: str = "") -> None:
        from edgebuild.registry import load_op, pass_names

        for index, spec in enumerate(passes):
            here = (*loc, str(index))
            if spec.name not in pass_names():
                self._add(here, f"unknown pass '{spec.name}'",
                          did_you_mean(spec.name, pass_names())
                          or f"passes: {', '.join(pass_names())}")
                continue
            op = load_op(spec.name)
            params, found = validate(op.Params, self.doc, spec.params, (*here, spec.name))
            if spec.name == "export-onnx" and self.recipe.custom_ops and \
                    spec.params.get("exporter") == "dynamo":
                self._add((*here, spec.name, "exporter"), "custom ops are exported with the "
                          "legacy exporter (their symbolics are registered with "
                          "torch.onnx.register_custom_op_symbolic)",
                          "remove `exporter: dynamo` (docs/custom-ops.md, Limits)")
            self.problems.extend(Problem(p.location, p.key, p.message + note, p.hint)
                                 for p in found)
            # Every dataset the params name, at any depth (accuracy_aware.dataset too);
            # an accuracy gate's (a budget's) is evaluated as the gates do, streams too.
            for path, dataset in dataset_refs(params) if params is not None else ():
                self._dataset(dataset, (*here, spec.name, *path),
                              streams=isinstance(_owner(params, path), AccuracyGate))

    def _accuracy(self, gates: Gates, loc: tuple[str, ...]) -> None:
        """Each accuracy gate's dataset and output exist (a list: at its index)."""
        listed = isinstance(gates.accuracy, list)
        for index, gate in enumerate(gates.accuracy_gates):
            here = (*loc, str(index)) if listed else loc
            self._dataset(gate.dataset, (*here, "dataset"), streams=True)
            self._box_labels(gate, here)
            for key in ("output", "boxes", "scores", "classes"):
                named = getattr(gate, key)
                if named is not None and named not in self.recipe.outputs:
                    self._add((*here, key), f"no model output named '{named}'",
                              did_you_mean(named, self.recipe.outputs)
                              or f"outputs: {', '.join(self.recipe.outputs)}")

    def _box_labels(self, gate: AccuracyGate, here: tuple[str, ...]) -> None:
        """A limit against labelled boxes needs a dataset that declares them."""
        dataset = self.recipe.datasets.get(gate.dataset)
        if dataset is None or (isinstance(dataset, ImageFolder) and dataset.box_labels):
            return
        for key in LABELLED_BOX_KEYS:
            if getattr(gate, key) is not None:
                self._add((*here, key), f"{key} is for labelled boxes, and dataset "
                          f"'{gate.dataset}' has none",
                          "declare them on the dataset: `labels: {format: yolo, path: "
                          "<folder>}` or `{format: coco, path: <file.json>}` (an images "
                          "dataset), or use min_map50 (agreement with FP32)")

    def _code(self, ref: str | None, loc: tuple[str, ...]) -> None:
        """The file or package a callable reference names exists (nothing is imported)."""
        missing = missing_code(ref, self.base_dir) if ref is not None else None
        if missing is not None:
            self._add(loc, *missing)

    def _dataset(self, name: str, loc: tuple[str, ...], note: str = "",
                 streams: bool = False) -> None:
        """`name` is a declared dataset; a stream's samples are whole sequences, which
        only accuracy gates (`streams`) evaluate step by step."""
        if name not in self.recipe.datasets:
            self._add(loc, f"no dataset named '{name}'{note}",
                      did_you_mean(name, self.recipe.datasets) or "declare it under `datasets:`")
        elif not streams and self.recipe.datasets[name].stream is not None:
            self._add(loc, f"dataset '{name}'{note} is a stream (`stream:`): its samples "
                      "are whole sequences, evaluated step by step by accuracy gates only",
                      "give this a dataset of single steps (each sample one step's inputs, "
                      "the state included)")

    def _options(self, loaded: LoadedProfile, overrides: dict[str, Any],
                 merged: dict[str, Any], loc: tuple[str, ...]) -> None:
        from edgebuild.registry import backend_class

        try:
            backend = backend_class(loaded.profile.backend)
        except EdgebuildError as exc:
            location, _ = loaded.doc.locate(("backend",))
            self.problems.append(Problem(location, "backend", exc.message, exc.hint))
            return
        if not backend.implemented:
            return  # options of a backend we cannot load are checked when it exists
        prepost = self.recipe.model.prepost
        nms = prepost is not None and prepost.detection is not None
        if nms and not backend.capabilities.converts_nms:
            # An ONNX source it cannot take at all is the first thing to say (Core ML).
            onnx_source = self.recipe.model.onnx is not None and "onnx" not in backend.accepts
            takes = (f"takes {' or '.join(backend.accepts)} models, not this ONNX source, "
                     "and " if onnx_source else "")
            self._add(("model", "prepost", "detection"),
                      f"target '{loc[-1]}' (line {self.doc.locate(loc)[0].line}) builds for "
                      f"{backend.name}, which {takes}cannot build NMS into the model",
                      (f"build {backend.name} from a recipe with a PyTorch `factory:` source "
                       if onnx_source else f"build {backend.name} from a recipe ")
                      + "without `prepost.detection` and run NMS in the app "
                      "(docs/backends-coreml.md)")
        # Report a bad override at the recipe line, a bad profile value in the profile.
        options, found = validate(backend.Options, self.doc, merged, (*loc, "options"))
        if found and not overrides:
            _, found = validate(backend.Options, loaded.doc, merged, ("options",))
        self.problems.extend(found)
        for path, dataset in dataset_refs(options) if options is not None else ():
            # A name the recipe wrote is reported there; one from the profile, at the target.
            where = (*loc, "options", *path) if path[0] in overrides else loc
            self._dataset(dataset, where, f" (backend option {'.'.join(path)})")


def location_of(doc: LoadedYaml, *keys: str) -> Location:
    return doc.locate(keys)[0]


def _owner(value: Any, path: tuple[str, ...]) -> Any:
    """The model holding the field at `path` (a dataset_refs key path) inside `value`."""
    for key in path[:-1]:
        if isinstance(value, BaseModel):
            value = getattr(value, key)
        elif isinstance(value, dict):
            value = value[key]
        else:
            value = value[int(key)]
    return value

