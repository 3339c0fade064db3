"""A search's candidate table, for report.json, summary.md and JUnit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from edgebuild.report.model import CandidateReport, SearchReport

if TYPE_CHECKING:
    from edgebuild.execute.result import ExecutionResult
    from edgebuild.recipe.loader import LoadedRecipe
    from edgebuild.run.search import SearchResult


def search_report(outcome: SearchResult, execution: ExecutionResult,
                  loaded: LoadedRecipe) -> SearchReport:
    from edgebuild.gates.select import pareto_front

    entry = loaded.recipe.targets[outcome.target]
    assert entry.search is not None
    written = {c.name: c for c in loaded.searches[outcome.target]}
    compared = {c["name"]: c for c in (outcome.ranking or {}).get("candidates", [])}
    rows = []
    for name, result in outcome.candidates.items():
        candidate = written[name]
        row = CandidateReport(
            name=name, state=result.state.value, reason=result.reason,
            summary=candidate.describe(), config=candidate.config(), grid=candidate.point,
            stage=result.stages.compiled, stages=result.own, chosen=name == outcome.chosen,
            gates=result.gates)
        latency = execution.runs.get(result.stages.latency or "")
        if latency is not None and latency.artifact is not None:
            stats: dict[str, Any] = latency.artifact.metadata
            if "profiles" in stats:  # shape profiles: the table shows the first one timed
                stats = next((r for r in stats["profiles"].values() if "p50" in r), {})
            p50, p90 = stats.get("p50"), stats.get("p90")  # a device tool may give neither
            row.p50_ms = float(p50) if p50 is not None else None
            row.p90_ms = float(p90) if p90 is not None else None
        compiled = execution.runs.get(result.stages.compiled)
        if compiled is not None and compiled.artifact is not None:
            row.size_mb = round(compiled.artifact.shipped_bytes / 1e6, 3)
            row.precision = compiled.artifact.precision_label
        for gate in result.gates:
            if gate.gate.startswith("accuracy"):
                row.top1_agreement = gate.measured.get("top1_agreement")
                row.cosine = gate.measured.get("cosine")
                row.top1 = gate.measured.get("top1")
        if name in compared:
            row.interleaved_ms = compared[name]["median_ms"]
            row.ratio = compared[name]["ratio"]
            row.ratio_ci95 = compared[name]["ci95"]
        rows.append(row)
    front = pareto_front({r.name: (r.p50_ms, r.top1_agreement) for r in rows
                          if r.p50_ms is not None and r.top1_agreement is not None})
    for row in rows:
        row.pareto = row.name in front
    selection = None
    if outcome.ranking is not None:
        selection = {k: v for k, v in outcome.ranking.items() if k != "candidates"}
    return SearchReport(chosen=outcome.chosen, message=outcome.message,
                        max_candidates=entry.search.max_candidates,
                        max_minutes=entry.search.max_minutes, seconds=outcome.seconds,
                        candidates=rows, selection=selection)
