"""Show a plan as text, JSON, Graphviz dot or Mermaid, each stage marked cached/to-run."""

from __future__ import annotations

import json

from edgebuild.plan.planner import Plan
from edgebuild.plan.resolve import StageState, StageStatus

FORMATS = ("text", "json", "dot", "mermaid")


def render(plan: Plan, status: dict[str, StageStatus], fmt: str) -> str:
    return {"text": _text, "json": _json, "dot": _dot, "mermaid": _mermaid}[fmt](plan, status)


def _label(plan: Plan, stage_id: str) -> str:
    """The stage id with the params that differ from the op's defaults (what a reviewer wrote)."""
    from edgebuild.registry import load_op

    stage = plan.stage(stage_id)
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
    order = plan.order()
    cached = sum(1 for s in status.values() if s.state is StageState.CACHED)
    loaded = plan.recipe
    lines = [f"plan for '{loaded.recipe.name}' ({loaded.path}): {len(order)} stages, "
             f"{cached} cached, {len(order) - cached} to run"]
    width = min(48, max(len(_label(plan, s.id)) for s in order))
    for stage in order:
        state = status[stage.id].state.value
        after = f"  <- {', '.join(stage.upstream)}" if stage.upstream else ""
        extra = "  (implicit)" if stage.implicit else ""
        lines.append(f"  {state:<7} {_label(plan, stage.id):<{width}}{after}{extra}")
    return "\n".join(lines)


def _json(plan: Plan, status: dict[str, StageStatus]) -> str:
    stages = [{
        "id": s.id, "op": s.op, "params": s.params, "target": s.target,
        "inputs": dict(s.inputs), "datasets": list(s.datasets), "measures": s.measures,
        "implicit": s.implicit, "state": status[s.id].state.value, "key": status[s.id].key,
    } for s in plan.order()]
    return json.dumps({"recipe": plan.recipe.recipe.name, "stages": stages}, indent=2)


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
