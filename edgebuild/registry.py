"""Where passes and backends come from: the `edgebuild.passes` and `edgebuild.backends`
entry-point groups, for edgebuild's own as for third-party packages.

An entry names a class; the class declares everything else (formats, options,
tools, version, extra, the conversions a backend contributes), so there is no
second table to keep in step. Nothing is imported until it is asked for, and
pass and backend modules import their vendor libraries only inside the methods
that need them, so validating and planning stay light (docs/extending.md).
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import EntryPoint, EntryPoints, entry_points
from typing import TYPE_CHECKING, Any

from edgebuild.errors import PlanError, did_you_mean

if TYPE_CHECKING:
    from edgebuild.backends.base import Backend
    from edgebuild.core.op import Op

PASS_GROUP = "edgebuild.passes"
BACKEND_GROUP = "edgebuild.backends"

# Internal stage operations the planner adds around the passes; not passes a
# recipe can name, so not entry points.
OPS: dict[str, str] = {
    "import-onnx": "edgebuild.passes.import_onnx:ImportOnnx",
    "prepost-onnx": "edgebuild.passes.prepost_onnx:PrepostOnnx",
    "compile": "edgebuild.passes.compile:Compile",
    "device-build": "edgebuild.passes.device_build:DeviceBuild",
    "reference": "edgebuild.measuring.reference:Reference",
    "infer": "edgebuild.measuring.infer:Infer",
    "measure-latency": "edgebuild.measuring.latency:MeasureLatency",
    "measure-throughput": "edgebuild.measuring.throughput:MeasureThroughput",
    "import-baseline": "edgebuild.measuring.import_baseline:ImportBaseline",
    "compare-latency": "edgebuild.measuring.compare_latency:CompareLatency",
    "compare-speed": "edgebuild.measuring.compare_latency:CompareTargets",
    "select": "edgebuild.measuring.select:Select",
}

# The conversion any PyTorch source may need whatever its targets: a model meeting an
# ONNX consumer is exported. Backends add theirs (`Backend.conversions`).
CORE_CONVERSIONS = ("export-onnx",)

_STALE_HINT = ("edgebuild's installed metadata lists no {what}: if it was installed from a "
               "source checkout, run `pip install -e .` again (entry points are read from it)")


def _import_ref(ref: str) -> Any:
    module_name, _, attr = ref.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


@cache
def _installed() -> dict[str, EntryPoints]:
    """Both groups from one read: each `entry_points()` call reads every installed
    distribution's entry_points.txt, whatever group it selects."""
    every = entry_points()
    return {group: every.select(group=group) for group in (PASS_GROUP, BACKEND_GROUP)}


@cache
def _entries(group: str) -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for entry in _installed()[group]:
        prior = found.get(entry.name)
        if prior is not None and prior.value != entry.value:
            raise PlanError(f"two installed packages register '{entry.name}' in {group}: "
                            f"{prior.value} and {entry.value}", "uninstall one of them")
        found[entry.name] = entry
    return found


def _unknown(kind: str, name: str, known: list[str]) -> PlanError:
    if not known:
        return PlanError(f"unknown {kind} '{name}'", _STALE_HINT.format(what=f"{kind}s"))
    return PlanError(f"unknown {kind} '{name}'",
                     did_you_mean(name, known) or f"known {kind}s: {', '.join(known)}")


def pass_names() -> list[str]:
    return sorted(_entries(PASS_GROUP))


def load_op(name: str) -> type[Op]:
    """The class of a pass or internal op; PlanError with a suggestion if unknown."""
    if name in OPS:
        return _import_ref(OPS[name])  # type: ignore[no-any-return]
    entry = _entries(PASS_GROUP).get(name)
    if entry is None:
        raise _unknown("pass", name, pass_names())
    return entry.load()  # type: ignore[no-any-return]


def backend_names() -> list[str]:
    return sorted(_entries(BACKEND_GROUP))


@cache
def backend_class(name: str) -> type[Backend]:
    """The declaration of a backend (its class); PlanError with a suggestion if unknown."""
    entry = _entries(BACKEND_GROUP).get(name)
    if entry is None:
        raise _unknown("backend", name, backend_names())
    cls: type[Backend] = entry.load()
    return cls


def load_backend(name: str) -> Backend:
    """An instance of a backend, to compile or run with."""
    return backend_class(name)()


def backend_tools(name: str) -> tuple[str, ...]:
    """Distributions whose versions enter the key of a stage run by this backend."""
    return tuple(backend_class(name).tools)


def conversions() -> dict[tuple[str, str], str]:
    """(from format, to format) -> the pass the planner inserts when a chain needs it."""
    names = [*CORE_CONVERSIONS]
    for backend in backend_names():
        names.extend(n for n in backend_class(backend).conversions if n not in names)
    table: dict[tuple[str, str], str] = {}
    for name in names:
        op = load_op(name)
        table[(op.accepts[0], op.produces)] = name
    return table

