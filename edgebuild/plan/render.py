"""Show a plan as text, JSON, Graphviz dot or Mermaid, each stage marked cached/to-run."""

from __future__ import annotations

import json
from typing import Any

from edgebuild.plan.planner import Plan, own_stages
from edgebuild.plan.resolve import StageState, StageStatus

FORMATS = ("text", "json", "dot", "mermaid")


def render(plan: Plan, status: dict[str, StageStatus], fmt: str) -> str:
    return {"text": _text, "json": _json, "dot": _dot, "mermaid": _mermaid}[fmt](plan, status)


def _label(plan: Plan, stage_id: str) -> str:
    """The stage id with the params that differ from the op's defaults (what a reviewer wrote)."""
    from edgebuild.registry import load_op

    stage = plan.stage(stage_id)
    if stage.op == "select":
        return f"{stage.id}({len(stage.inputs)} candidates)"
    fields = load_op(stage.op).Params.model_fields
    shown = {}
    for key, value in stage.params.items():
        field = fields.get(key)
        if field is not None and not field.is_required():
            default = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
            if value == (default.value if hasattr(default, "value") else default):
                continue
        shown[key] = value
    params = ", ".join(f"{k}={v}" for k, v in shown.items())
    return f"{stage.id}({params})" if params else stage.id


def _text(plan: Plan, status: dict[str, StageStatus]) -> str:
    """One line per stage; a search's candidates one line each, their own stages folded."""
    order = plan.order()
    cached = sum(1 for s in status.values() if s.state is StageState.CACHED)
    loaded = plan.recipe
    lines = [f"plan for '{loaded.recipe.name}' ({loaded.path}): {len(order)} stages, "
             f"{cached} cached, {len(order) - cached} to run"]
    owned = _owned(plan)
    shown = [s for s in order if s.id not in owned]
    width = min(48, max(len(_label(plan, s.id)) for s in shown))
    for stage in shown:
        state = status[stage.id].state.value
        if stage.op == "select":
            lines += _search_lines(plan, stage.target or "", status)
            note = "  (times the candidates that pass every gate, keeps the fastest)"
            lines.append(f"  {state:<7} {_label(plan, stage.id):<{width}}{note}")
            continue
        after = f"  <- {', '.join(stage.upstream)}" if stage.upstream else ""
        extra = "  (implicit)" if stage.implicit else ""
        lines.append(f"  {state:<7} {_label(plan, stage.id):<{width}}{after}{extra}")
    return "\n".join(lines + cached_warnings(plan, status))


def cached_warnings(plan: Plan, status: dict[str, StageStatus]) -> list[str]:
    """What a cached stage found out about the recipe that no check at load time can
    (a quantize stage's calibration data never reaching the detector's threshold:
    quant/score_range.py): known now, before the run that would fail on it."""
    from edgebuild.core.thresholds import gate_sentences

    def record(stage_id: str) -> dict[str, Any] | None:
        found = status[stage_id].artifact if stage_id in status else None
        value = found.metadata.get("score_range") if found is not None else None
        return value if isinstance(value, dict) else None

    said: dict[str, list[str]] = {}  # stage id -> sentences, each once
    for stage in plan.order():
        warning = (record(stage.id) or {}).get("warning")
        if warning:
            said.setdefault(stage.id, []).append(warning)
    for name, stages in plan.targets.items():  # a gate's threshold above the range seen
        entry = plan.recipe.recipe.targets.get(name)
        for gate in entry.gates.accuracy_gates if entry is not None else []:
            for stage_id in stages.chain:
                for sentence in gate_sentences(record(stage_id), gate):
                    if sentence not in said.get(stage_id, []):
                        said.setdefault(stage_id, []).append(sentence)
    return [f"warning: {stage_id} (cached): {sentence}"
            for stage_id, sentences in said.items() for sentence in sentences]


def _owned(plan: Plan) -> dict[str, tuple[str, str]]:
    """Stage id -> (target, candidate) for the stages only one search candidate needs."""
    if not any(t.search for t in plan.targets.values()):
        return {}
    return {sid: (target, name) for target, by_name in own_stages(plan).items()
            for name, ids in by_name.items() for sid in ids}


def _search_lines(plan: Plan, target: str, status: dict[str, StageStatus]) -> list[str]:
    entry = plan.recipe.recipe.targets[target]
    assert entry.search is not None
    own = own_stages(plan)[target]
    candidates = plan.recipe.searches[target]
    budget = f"max {entry.search.max_candidates}" + (
        f", {entry.search.max_minutes:g} min" if entry.search.max_minutes is not None else "")
    lines = [f"  search  {target}: {len(candidates)} candidates ({budget}), each its passes "
             "-> compile -> infer -> measure-latency"]
    width = max(len(c.name) for c in candidates)
    for candidate in candidates:
        ids = own[candidate.name]
        done = sum(1 for sid in ids if status[sid].state is StageState.CACHED)
        state = "cached" if done == len(ids) else "to-run" if not done else f"{done}/{len(ids)}"
        lines.append(f"    {state:<7} {candidate.name:<{width}}  {candidate.describe()}")
    return lines


def _json(plan: Plan, status: dict[str, StageStatus]) -> str:
    stages = [{
        "id": s.id, "op": s.op, "params": s.params, "target": s.target,
        "inputs": dict(s.inputs), "datasets": list(s.datasets), "measures": s.measures,
        "runs_on": s.runs_on.value, "implicit": s.implicit,
        "state": status[s.id].state.value, "key": status[s.id].key,
    } for s in plan.order()]
    searches = {
        target: {"select": t.search.select,
                 "candidates": {c.name: {"summary": c.describe(), "config": c.config(),
                                         "compile": t.search.candidates[c.name].compiled}
                                for c in plan.recipe.searches[target]}}
        for target, t in plan.targets.items() if t.search is not None}
    return json.dumps({"recipe": plan.recipe.recipe.name, "stages": stages,
                       **({"searches": searches} if searches else {})}, indent=2)


def _dot(plan: Plan, status: dict[str, StageStatus]) -> str:
    lines = ["digraph plan {", "  rankdir=LR;", "  node [shape=box, style=rounded];"]
    for stage in plan.order():
        cached = status[stage.id].state is StageState.CACHED
        style = ', style="rounded,filled", fillcolor="#d9f2d9"' if cached else ""
        lines.append(f'  "{stage.id}" [label="{_label(plan, stage.id)}\\n'
                     f'{status[stage.id].state.value}"{style}];')
    lines += [f'  "{a}" -> "{b}";' for a, b in plan.graph.edges]
    return "\n".join([*lines, "}"])


def _mermaid(plan: Plan, status: dict[str, StageStatus]) -> str:
    ids = {s.id: f"s{i}" for i, s in enumerate(plan.order())}
    lines = ["flowchart LR"]
    for stage in plan.order():
        label = _label(plan, stage.id).replace('"', "'")
        lines.append(f'  {ids[stage.id]}["{label}<br/>{status[stage.id].state.value}"]')
        if status[stage.id].state is StageState.CACHED:
            lines.append(f"  class {ids[stage.id]} cached")
    lines += [f"  {ids[a]} --> {ids[b]}" for a, b in plan.graph.edges]
    lines.append("  classDef cached fill:#d9f2d9")
    return "\n".join(lines)
