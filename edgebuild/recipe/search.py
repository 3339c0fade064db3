"""A target's search candidates: expand grids into named configurations (pure, light).

A candidate is written once and may carry a grid; the grid's product becomes
one candidate per combination, named after the values that differ::

    int8:                                      int8-minmax-per_channel=true
      passes: [quantize: {mode: static, ...}]  int8-minmax-per_channel=false
      grid:                               ->   int8-entropy-per_channel=true
        quantize.method: [minmax, entropy]     int8-entropy-per_channel=false
        quantize.per_channel: [true, false]

Grid keys address a param of one of the candidate's passes (`quantize.method`,
dotted for nested params, `quantize#2.method` when the pass appears twice), a
backend option (`options.graph_optimization_level`) or a measurement setting
(`measure.threads`). Whether the resulting values are valid is checked by the
loader with each op's own Params, like any pass written out by hand.
"""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from edgebuild.errors import did_you_mean
from edgebuild.recipe.common import MeasureOverrides
from edgebuild.recipe.models import PassSpec, SearchCandidate


def candidate_target(target: str, candidate: str) -> str:
    """The name a candidate's stages are built for: `host-cpu[int8-entropy]`."""
    return f"{target}[{candidate}]"


@dataclass(frozen=True)
class Candidate:
    """One expanded configuration of a target's search."""

    target: str  # the recipe target whose search it belongs to
    name: str
    passes: tuple[PassSpec, ...] = ()
    inherit_passes: bool = True
    options: dict[str, Any] = field(default_factory=dict)
    measure: MeasureOverrides | None = None
    origin: str = ""  # the key it was written under in `candidates:`
    point: dict[str, Any] = field(default_factory=dict)  # grid key -> value ({} without grid)

    @property
    def target_name(self) -> str:
        return candidate_target(self.target, self.name)

    def config(self) -> dict[str, Any]:
        """The configuration as plain data, for reports."""
        found: dict[str, Any] = {
            "passes": [{spec.name: spec.params} for spec in self.passes]}
        if not self.inherit_passes:
            found["inherit_passes"] = False
        if self.options:
            found["options"] = self.options
        if self.measure is not None:
            found["measure"] = self.measure.model_dump(exclude_none=True)
        return found

    def describe(self) -> str:
        """One compact line: what this candidate adds to the target."""
        parts = [_call(spec.name, spec.params) for spec in self.passes]
        if self.options:
            parts.append(_call("options", self.options))
        if self.measure is not None:
            parts.append(_call("measure", self.measure.model_dump(exclude_none=True)))
        text = " + ".join(parts) or "the target as written"
        return text if self.inherit_passes else f"only {text}"


class GridError(ValueError):
    """A grid key that cannot be applied; `key` is the grid key, for the location."""

    def __init__(self, key: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.key = key
        self.message = message
        self.hint = hint


def expand(target: str, name: str, spec: SearchCandidate) -> list[Candidate]:
    """The candidates `spec` stands for: itself, or one per grid combination."""
    base = Candidate(target, name, tuple(spec.passes), spec.inherit_passes, dict(spec.options),
                     spec.measure, origin=name)
    if not spec.grid:
        return [base]
    keys = list(spec.grid)
    for key in keys:  # a bad key is reported once, not once per combination
        _apply(base, key, spec.grid[key][0])
    found = []
    for values in itertools.product(*(spec.grid[k] for k in keys)):
        candidate = base
        for key, value in zip(keys, values, strict=True):
            candidate = _apply(candidate, key, value)
        tokens = [token(key, value, spec.grid[key]) for key, value in zip(keys, values,
                                                                          strict=True)]
        found.append(Candidate(target, "-".join([name, *tokens]), candidate.passes,
                               candidate.inherit_passes, candidate.options, candidate.measure,
                               origin=name, point=dict(zip(keys, values, strict=True))))
    return found


def token(key: str, value: Any, values: list[Any]) -> str:
    """How one grid value appears in a candidate name: strings as themselves, else leaf=value."""
    leaf = key.rsplit(".", 1)[-1]
    if isinstance(value, str):
        return re.sub(r"[^A-Za-z0-9_.,=+-]", "_", value)
    if isinstance(value, bool) or value is None:
        return f"{leaf}={str(value).lower()}"
    if isinstance(value, int | float):
        return f"{leaf}={value:g}"
    return f"{leaf}{values.index(value) + 1}"  # a dict or list value: its position


def _apply(candidate: Candidate, key: str, value: Any) -> Candidate:
    head, _, rest = key.partition(".")
    if not rest:
        raise GridError(key, f"grid key '{key}' names no parameter",
                        "write `pass.param`, `options.key` or `measure.key`")
    path = rest.split(".")
    if head == "options":
        options = copy.deepcopy(candidate.options)
        _set(options, path, value, key)
        return _replace(candidate, options=options)
    if head == "measure":
        if len(path) != 1 or path[0] not in MeasureOverrides.model_fields:
            fields = list(MeasureOverrides.model_fields)
            raise GridError(key, f"no measurement setting '{rest}'",
                            did_you_mean(rest, fields) or f"settings: {', '.join(fields)}")
        current = candidate.measure.model_dump() if candidate.measure else {}
        current[path[0]] = value
        try:
            measure = MeasureOverrides.model_validate(current)
        except ValidationError as exc:
            raise GridError(key, f"grid key '{key}': {exc.errors()[0]['msg']} "
                            f"(got {value!r})") from None
        return _replace(candidate, measure=measure)
    index = _pass_index(candidate, head, key)
    passes = list(candidate.passes)
    params = copy.deepcopy(passes[index].params)
    _set(params, path, value, key)
    passes[index] = PassSpec(name=passes[index].name, params=params)
    return _replace(candidate, passes=tuple(passes))


def _pass_index(candidate: Candidate, head: str, key: str) -> int:
    name, _, nth = head.partition("#")
    indexes = [i for i, spec in enumerate(candidate.passes) if spec.name == name]
    if not indexes:
        names = [spec.name for spec in candidate.passes]
        raise GridError(key, f"grid key '{key}': this candidate has no '{name}' pass",
                        did_you_mean(name, [*names, "options", "measure"])
                        or f"its passes: {', '.join(names) or 'none'}; or use options./measure.")
    if nth:
        if not nth.isdigit() or not 1 <= int(nth) <= len(indexes):
            raise GridError(key, f"grid key '{key}': there is no '{name}' pass number {nth}",
                            f"this candidate has {len(indexes)} (counted from 1)")
        return indexes[int(nth) - 1]
    if len(indexes) > 1:
        raise GridError(key, f"grid key '{key}': this candidate has {len(indexes)} "
                        f"'{name}' passes", f"say which: `{name}#1.…`, `{name}#2.…`")
    return indexes[0]


def _set(target: dict[str, Any], path: list[str], value: Any, key: str) -> None:
    for part in path[:-1]:
        inner = target.setdefault(part, {})
        if inner is None:
            inner = target[part] = {}
        if not isinstance(inner, dict):
            raise GridError(key, f"grid key '{key}': '{part}' is {inner!r}, not a mapping")
        target = inner
    target[path[-1]] = value


def _replace(candidate: Candidate, **changes: Any) -> Candidate:
    values = {f: getattr(candidate, f) for f in Candidate.__dataclass_fields__}
    values.update(changes)
    return Candidate(**values)


def _short(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _call(name: str, params: dict[str, Any]) -> str:
    inner = ", ".join(f"{k}={_short(v)}" for k, v in params.items())
    return f"{name}({inner})" if inner else name
