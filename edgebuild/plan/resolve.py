"""Compute stage keys from upstream artifacts, and what a plan would rebuild.

A key needs the *content digest* of each input, which exists only once the
input is built. So walking the graph in order, a stage's key is known when all
its inputs are cached (or were just built); below the first stage to run,
everything is "to run".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import Any

from edgebuild.cache.digest import StatCache
from edgebuild.cache.keys import stage_key
from edgebuild.cache.store import Store
from edgebuild.core.artifact import Artifact
from edgebuild.core.digest import digest_json
from edgebuild.data.digest import dataset_digest
from edgebuild.errors import DataError, EdgebuildError, Location
from edgebuild.plan.planner import Plan
from edgebuild.plan.stage import Stage
from edgebuild.recipe.files import module_file, resolve_file, split_callable
from edgebuild.recipe.siblings import local_imports
from edgebuild.registry import backend_class, load_op


class StageState(StrEnum):
    CACHED = "cached"
    TO_RUN = "to-run"


@dataclass(frozen=True)
class StageStatus:
    state: StageState
    key: str | None  # None when an upstream stage still has to run
    artifact: Artifact | None = None


class KeyResolver:
    def __init__(self, plan: Plan, store: Store) -> None:
        self.plan = plan
        self.store = store
        self.stats = StatCache(store.root / "file-digests.json")
        self._datasets: dict[str, str] = {}

    @cached_property
    def source_digest(self) -> str:
        """Digest of the model source: its declaration plus every file it reads."""
        loaded = self.plan.recipe
        model = loaded.recipe.model
        files = {}
        if model.onnx is not None:
            files["onnx"] = resolve_file(model.onnx, loaded.base_dir)
        if model.weights is not None:
            files["weights"] = resolve_file(model.weights, loaded.base_dir)
        if model.factory is not None:
            module, _ = split_callable(model.factory)
            try:
                source = module_file(module, loaded.base_dir)
            except EdgebuildError as exc:
                raise DataError(f"model.factory: {exc.message}", exc.hint).at(
                    self._where("model", "factory")) from None
            if source is not None:
                files["factory"] = source
                if module.endswith(".py"):  # what it imports from beside it runs too
                    files.update({f"factory/{rel}": path for rel, path in local_imports(source)})
        for role, path in files.items():
            if not path.is_file():
                raise DataError(f"model.{role}: file {path} not found",
                                "paths are relative to the recipe file").at(
                    self._where("model", role))
        return digest_json({
            "model": model.model_dump(mode="json"),
            "files": {role: self.stats.digest(path) for role, path in files.items()},
        })

    @cached_property
    def custom_ops_digest(self) -> str:
        """Digest of the custom-op declarations and of every file they name (the torch
        op's module, the decomposition, the kernels), so editing a kernel rebuilds."""
        from edgebuild.customops.files import custom_op_files

        loaded = self.plan.recipe
        try:
            files = custom_op_files(loaded.recipe.custom_ops, loaded.base_dir)
        except EdgebuildError as exc:
            raise DataError(exc.message, exc.hint).at(self._where("custom_ops")) from None
        for (name, role), path in files.items():
            if not path.is_file():
                raise DataError(f"custom op '{name}': {role} file {path} not found",
                                "paths are relative to the recipe file").at(
                    self._where("custom_ops", name))
        return digest_json({
            "ops": {n: op.model_dump(mode="json") for n, op in loaded.recipe.custom_ops.items()},
            "files": {f"{n}/{r}": self.stats.digest(p) for (n, r), p in sorted(files.items())},
        })

    def _where(self, *keys: str) -> Location:
        return self.plan.recipe.doc.locate(keys)[0]

    def dataset(self, name: str) -> str:
        if name not in self._datasets:
            loaded = self.plan.recipe
            spec = loaded.recipe.datasets[name]
            try:
                self._datasets[name] = dataset_digest(spec, loaded.base_dir, self.stats)
            except EdgebuildError as exc:
                raise DataError(f"dataset '{name}': {exc.message}", exc.hint).at(
                    self._where("datasets", name)) from None
        return self._datasets[name]

    def key(self, stage: Stage, inputs: dict[str, Artifact]) -> str:
        op = load_op(stage.op)
        recipe = self.plan.recipe.recipe
        target = self.plan.recipe.targets[stage.target] if stage.target else None
        return stage_key(
            op=stage.op, op_version=op.version, params=stage.params,
            inputs={role: a.digest for role, a in inputs.items()},
            datasets={d: self.dataset(d) for d in stage.datasets},
            source=self.source_digest if stage.uses_source else None,
            custom_ops=self.custom_ops_digest if stage.custom_ops else None,
            io=stage.io_declarations(recipe),
            target=digest_json(target.digest_data()) if target else None,
            backend=self._backend(target.backend) if target else None,
            tools=op().tool_names(target),
            callables=self._callables(stage, op.callable_params),
            host_bound=op().host_bound(stage.params),
        )

    def _callables(self, stage: Stage, names: tuple[str, ...]) -> dict[str, str]:
        """param -> digest of the source file of the function it names (a module of an
        installed package too: its code is what runs); `param/sibling.py` -> digest of
        each module a `file.py` imports from its own folder (recipe/siblings.py)."""
        found = {}
        for name in names:
            ref = stage.params.get(name)
            if not ref:
                continue
            try:
                source = module_file(split_callable(ref)[0], self.plan.recipe.base_dir)
            except (EdgebuildError, ImportError, ValueError) as exc:
                raise DataError(f"{stage.op}.{name} '{ref}': {exc}",
                                "name an importable module or a .py file relative to the "
                                "recipe") from None
            if source is None:
                continue  # a built-in module: its version is Python's
            if not source.is_file():
                raise DataError(f"{stage.op}.{name} '{ref}': file {source} not found",
                                "paths are relative to the recipe file")
            found[name] = self.stats.digest(source)
            if split_callable(ref)[0].endswith(".py"):
                found.update({f"{name}/{rel}": self.stats.digest(path)
                              for rel, path in local_imports(source)})
        return found

    @staticmethod
    def _backend(name: str) -> dict[str, Any]:
        declared = backend_class(name)
        return {"name": declared.name, "version": declared.version}

    def status(self) -> dict[str, StageStatus]:
        """Cached or to-run for every stage, without running or verifying anything."""
        result: dict[str, StageStatus] = {}
        for stage in self.plan.order():
            upstream = {role: result[sid] for role, sid in stage.inputs}
            if any(s.artifact is None for s in upstream.values()):
                result[stage.id] = StageStatus(StageState.TO_RUN, None)
                continue
            inputs = {role: s.artifact for role, s in upstream.items() if s.artifact}
            key = self.key(stage, inputs)
            artifact = self.store.present(key)
            state = StageState.CACHED if artifact else StageState.TO_RUN
            result[stage.id] = StageStatus(state, key, artifact)
        self.stats.save()
        return result
